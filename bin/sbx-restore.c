/* sbx-restore: restore a snapshot into a funded target lease and continue it. */
#include "snap/snap.h"

int main(int argc, char **argv)
{
	common_set_progname("sbx-restore");
	return snap_restore_main(argc, argv);
}
