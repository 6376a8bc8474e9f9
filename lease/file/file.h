/* The directory back end (SPEC §2): a journal of receipts (the truth), a record
 * file per lease and the slot index derived from it, the clock file. */
#ifndef SBX_LEASE_FILE_H
#define SBX_LEASE_FILE_H

#include "lease/backend/backend.h"

extern const struct lease_backend lease_file_backend;

#endif
