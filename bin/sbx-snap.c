/* sbx-snap: snapshot a running guest; list, show, verify, export, import snapshots. */
#include "snap/snap.h"

int main(int argc, char **argv)
{
	common_set_progname("sbx-snap");
	return snap_cli_main(argc, argv);
}
