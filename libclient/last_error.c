/* Per-thread last errors (last_error.h). */
#include "last_error.h"

#include <stdatomic.h>
#include <stdio.h>

/* Clients a thread remembers a message for at once: the one whose last
 * failure is oldest is forgotten first. */
#define SLOTS 4

struct slot {
	uint64_t serial; /* 0: free */
	uint64_t used;   /* when it was last written, in this thread's count */
	char msg[RUDA__LAST_ERROR_LEN];
};

static _Thread_local struct slot slots[SLOTS];
static _Thread_local uint64_t writes;
static atomic_uint_fast64_t next_serial = 1;

uint64_t ruda__last_error_serial(void)
{
	return atomic_fetch_add(&next_serial, 1);
}

void ruda__last_error_vset(uint64_t serial, const char *fmt, va_list ap)
{
	struct slot *s = &slots[0];
	for (int i = 0; i < SLOTS; i++) {
		if (slots[i].serial == serial) {
			s = &slots[i];
			break;
		}
		if (slots[i].used < s->used)
			s = &slots[i]; /* free slots have used 0 */
	}
	s->serial = serial;
	s->used = ++writes;
	vsnprintf(s->msg, sizeof(s->msg), fmt, ap);
}

const char *ruda__last_error_get(uint64_t serial)
{
	for (int i = 0; i < SLOTS; i++)
		if (slots[i].serial == serial)
			return slots[i].msg;
	return "";
}
