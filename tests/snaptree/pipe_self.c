/* snaptree guest: one process and its own pipe, always holding bytes: each
 * step writes a line into it and reads back the line written two steps ago. */
#include <string.h>
#include "guest.h"

int main(void)
{
	int p[2];
	char line[32];
	if (pipe(p) < 0)
		return 1;
	for (int s = 0; s < 42; s++) {
		snprintf(line, sizeof line, "line %02d\n", s);
		if (write(p[1], line, 8) != 8)
			return 2;
		if (s >= 2) {
			if (read(p[0], line, 8) != 8)
				return 3;
			say("step %d read %.7s\n", s, line);
		}
		nap(50);
	}
	return 0;
}
