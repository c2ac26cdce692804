/*
 * ruda_client_last_error's messages: per thread, each remembering the
 * client it came from (by serial number, not address: a new client at a
 * freed one's address must not inherit its message).
 */
#ifndef RUDA_LAST_ERROR_H
#define RUDA_LAST_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define RUDA__LAST_ERROR_LEN 512

/* A fresh serial for a new client (never 0). */
uint64_t ruda__last_error_serial(void);
/* Record this thread's message for client `serial`. */
void ruda__last_error_vset(uint64_t serial, const char *fmt, va_list ap);
/* This thread's message for client `serial`, or "" (until the thread
 * records another one; the pointer is the thread's own). */
const char *ruda__last_error_get(uint64_t serial);

#endif
