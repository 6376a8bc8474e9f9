/* A program embedding libsbx through the installed sbx.h only, linked with -lsbx
 * against libsbx.so (tests/embed.bats): sbx-run's command line as sbx_run, and
 * the sbx_call entry points resolved from the shared library. */
#include <stdio.h>
#include <string.h>
#include <sbx.h>

int main(int argc, char **argv)
{
	static const struct sbx_sandbox sb = { .inspect_classes = TRACE_CLASS_FILE };

	common_set_progname("embed");
	if (argc == 2 && !strcmp(argv[1], "--entry-points")) {
		/* a sandbox without a callback type is refused before anything runs */
		struct common_err e = { "", "" };
		struct sbx_sandbox s = sb;
		int (*volatile map)(struct sbx_call *, uint64_t, size_t, struct sbx_mem *) = sbx_call_map;
		s.err = &e;
		printf("%d %d\n", sbx_call(&s, NULL, NULL, NULL), map != NULL);
		fflush(stdout);
		common_report(&e);
		return 0;
	}
	return sbx_run(argc, argv);
}
