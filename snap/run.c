/* sbx_run (sbx.h): sbx-run's command line as a call. It lives in snap/, the top
 * room, because only the top may plug the snapshot operations into a run. */
#include "snap/snap.h"

int sbx_run(int argc, char **argv)
{
	return trace_run_cli(argc, argv, &snap_ops);
}
