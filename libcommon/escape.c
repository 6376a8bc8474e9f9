/* Guest-chosen bytes made safe for a terminal, as `ls -b` and strace show them:
 * C escapes for the usual controls, \ooo for other control bytes (C0, DEL and the
 * UTF-8 encodings of C1), \xHH for bytes that are not valid UTF-8; printable
 * UTF-8 passes unchanged, so ordinary non-ASCII names stay readable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "libcommon/common.h"

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned cp;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and values past U+10FFFF are invalid */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static char c_escape(unsigned char c)
{
	static const char from[] = "\a\b\t\n\v\f\r\033", to[] = "abtnvfre";
	const char *p = c ? memchr(from, c, sizeof from - 1) : NULL;
	return p ? to[p - from] : 0;
}

char *common_escape(const char *str, size_t len, unsigned flags)
{
	const unsigned char *s = (const unsigned char *)str;
	/* the worst case is four output bytes per input byte */
	char *out = common_xmalloc(len * 4 + 1), *o = out;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(s + i, len - i);
		if (n == 0) {
			o += sprintf(o, "\\x%02x", s[i++]);
			continue;
		}
		/* U+0080..U+009F: C1 controls (CSI is U+009B) */
		int c1 = n == 2 && s[i] == 0xc2 && s[i + 1] < 0xa0;
		if (n == 1 && s[i] == '\\' && !(flags & COMMON_ESC_KEEP_BACKSLASH)) {
			*o++ = '\\';
			*o++ = '\\';
		} else if (n == 1 && (s[i] < 0x20 || s[i] == 0x7f)) {
			char ce = c_escape(s[i]);
			o += ce ? sprintf(o, "\\%c", ce) : sprintf(o, "\\%03o", s[i]);
		} else if (c1) {
			o += sprintf(o, "\\%03o\\%03o", s[i], s[i + 1]);
		} else {
			memcpy(o, s + i, n);
			o += n;
		}
		i += n;
	}
	*o = 0;
	return out;
}

int common_escape_print(FILE *f, const char *s)
{
	if (!s)
		return 0;
	char *x = common_escape(s, strlen(s), 0);
	int rc = fputs(x, f);
	free(x);
	return rc;
}
