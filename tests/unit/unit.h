/* Minimal unit-test harness: CHECK records a failure and goes on; the closing
 * line is "NAME: N passed, N failed". */
#ifndef SBX_UNIT_H
#define SBX_UNIT_H
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int unit_passed, unit_failed;

#define CHECK(cond) do { \
	if (cond) unit_passed++; \
	else { unit_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)
#define CHECK_STR(a, b) do { \
	const char *a_ = (a), *b_ = (b); \
	if (a_ && b_ && !strcmp(a_, b_)) unit_passed++; \
	else { unit_failed++; fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } \
} while (0)

/* Give up what lets root read and change any file (for good: call it in a child), so
 * a directory its owner made mode 000 stops us as it stops an unprivileged user. */
static inline int unit_drop_dac(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	d[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH) |
			    (1u << CAP_FOWNER));
	return (int)syscall(SYS_capset, &h, d);
}

static inline int unit_finish(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, unit_passed, unit_failed);
	return unit_failed ? 1 : 0;
}
#endif
