/*
 * The status table's internal side (the table itself is generated from
 * enum Status of ruda.proto into $(BUILD)/gen/status_table.c; ruda_strerror,
 * its public side, is declared in <ruda/status.h>). Hidden: not part of
 * libruda's ABI.
 */
#ifndef RUDA_PROTO_STATUS_TABLE_H
#define RUDA_PROTO_STATUS_TABLE_H

/* The proto's name of `status` ("ERROR_QUOTA"); NULL for an unknown value. */
__attribute__((visibility("hidden"))) const char *ruda__status_name(int status);

/* One past the largest status value. */
__attribute__((visibility("hidden"))) int ruda__status_limit(void);

#endif
