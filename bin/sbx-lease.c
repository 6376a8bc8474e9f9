/* sbx-lease: create and move leases through their lifecycle (see sbx-lease(1)). */
#include "lease/lease.h"

int main(int argc, char **argv)
{
	common_set_progname("sbx-lease");
	return lease_cli_main(argc, argv);
}
