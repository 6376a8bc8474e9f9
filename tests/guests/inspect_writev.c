/* writev whose iovec an inspector may replace; the guest's own iovec is printed after. */
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int main(void)
{
	char a[] = "hello ", b[] = "world\n";
	struct iovec iov[2] = {{a, 6}, {b, 6}};
	ssize_t n = writev(1, iov, 2);
	char msg[128];
	int l = snprintf(msg, sizeof msg, "writev returned %zd; own iovec: %.*s%.*s", n,
			 (int)iov[0].iov_len, (char *)iov[0].iov_base, (int)iov[1].iov_len,
			 (char *)iov[1].iov_base);
	if (write(2, msg, (size_t)l) < 0)
		return 1;
	return 0;
}
