/* sbx-run: run a guest under a lease inside the sandbox boundary (see sbx-run(1)). */
#include "sbx.h"

int main(int argc, char **argv)
{
	common_set_progname("sbx-run");
	return sbx_run(argc, argv);
}
