/* sbx-trace: read traces written by sbx-run --trace (see sbx-trace(1)). */
#include "snap/snap.h"

int main(int argc, char **argv)
{
	common_set_progname("sbx-trace");
	return trace_cli_main(argc, argv, &snap_adj_ops);
}
