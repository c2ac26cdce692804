/* rudactl: inspect and manage a running rudad (see rudactl(1)). */
#include "rudactl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ruda/ruda.h>

#include "../libclient/wire.h"

#ifndef RUDA_VERSION
#define RUDA_VERSION "0.0.0"
#endif

/* ---- formatting ----------------------------------------------------------- */

const char *fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return buf;
	}
	double v = (double)bytes / 1024.0;
	size_t u = 0;
	while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

const char *fmt_ms(char *buf, size_t len, uint64_t ms)
{
	uint64_t s = ms / 1000;
	if (ms < 1000)
		snprintf(buf, len, "%" PRIu64 " ms", ms);
	else if (ms < 60000)
		snprintf(buf, len, "%.1f s", (double)ms / 1000.0);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
	else
		snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s / 3600 % 24);
	return buf;
}

const char *fmt_ns(char *buf, size_t len, uint64_t ns)
{
	if (ns == 0)
		snprintf(buf, len, "0 ms");
	else if (ns < 10000000u)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else if (ns < 1000000000u)
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
	else if (ns < 60000000000ull)
		snprintf(buf, len, "%.3f s", (double)ns / 1e9);
	else
		return fmt_ms(buf, len, ns / 1000000u);
	return buf;
}

const char *fmt_vk_version(char *buf, size_t len, uint32_t v)
{
	snprintf(buf, len, "%u.%u.%u", v >> 22, (v >> 12) & 0x3ffu, v & 0xfffu);
	return buf;
}

const char *fmt_hex(char *buf, size_t buflen, const uint8_t *data, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < len && n + 3 <= buflen; i++)
		n += (size_t)snprintf(buf + n, buflen - n, "%02x", data[i]);
	return buf;
}

void table_init(struct table *t, size_t ncols, const char *const *headers, const char *align)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->headers = headers;
	t->align = align;
}

void table_cell(struct table *t, const char *fmt, ...)
{
	if (t->col == 0) {
		if (t->nrows == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 16;
			char **cells = realloc(t->cells, cap * t->ncols * sizeof(*cells));
			if (!cells) {
				fprintf(stderr, "rudactl: out of memory\n");
				exit(CTL_EXIT_DAEMON);
			}
			t->cells = cells;
			t->cap = cap;
		}
		t->nrows++;
	}
	va_list ap;
	va_start(ap, fmt);
	char *cell = NULL;
	if (vasprintf(&cell, fmt, ap) < 0)
		cell = NULL;
	va_end(ap);
	t->cells[(t->nrows - 1) * t->ncols + t->col] = cell;
	t->col = (t->col + 1) % t->ncols;
}

void table_print(const struct table *t, FILE *out)
{
	size_t width[32] = {0};
	for (size_t c = 0; c < t->ncols && c < 32; c++) {
		width[c] = strlen(t->headers[c]);
		for (size_t r = 0; r < t->nrows; r++) {
			const char *cell = t->cells[r * t->ncols + c];
			size_t w = cell ? strlen(cell) : 0;
			if (w > width[c])
				width[c] = w;
		}
	}
	for (size_t r = 0; r <= t->nrows; r++) {
		for (size_t c = 0; c < t->ncols && c < 32; c++) {
			const char *cell = r == 0 ? t->headers[c] : t->cells[(r - 1) * t->ncols + c];
			if (!cell)
				cell = "";
			int right = t->align && t->align[c] == 'r';
			int last = c + 1 == t->ncols;
			if (right)
				fprintf(out, "%*s", (int)width[c], cell);
			else if (last)
				fputs(cell, out);
			else
				fprintf(out, "%-*s", (int)width[c], cell);
			if (!last)
				fputs("  ", out);
		}
		fputc('\n', out);
	}
}

void table_finish(struct table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

/* ---- connection ------------------------------------------------------------ */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}


/* Send `req` at once; 0 or a negative errno. */
static int send_request(struct ctl *c, Ruda__Request *req)
{
	size_t size;
	ruda_status st = ruda__wire_queue(&c->out, req, &size);
	if (st != RUDA_OK)
		return st == RUDA_ERROR_INVALID_ARGUMENT ? -EMSGSIZE : -ENOMEM;
	return ruda__frame_writer_flush(&c->out, c->fd, 0);
}

/* The next reply; NULL with errno set (ETIMEDOUT, ECONNRESET for EOF,
 * EPROTO for garbage). Passed fds are closed. */
static Ruda__Reply *recv_reply(struct ctl *c)
{
	double deadline = now_s() + c->timeout_ms / 1000.0;
	for (;;) {
		struct ruda_frame frame;
		Ruda__Reply *reply;
		int r = ruda__wire_next_reply(&c->in, &frame, &reply);
		if (r < 0) {
			errno = EPROTO;
			return NULL;
		}
		if (r > 0) {
			for (uint16_t i = 0; i < frame.nfds; i++)
				close(frame.fds[i]);
			if (!reply)
				errno = EPROTO;
			return reply;
		}
		int left = (int)((deadline - now_s()) * 1000.0);
		ssize_t got = ruda__wire_recv(&c->in, c->fd, left > 0 ? left : 0);
		if (got == -EINTR || got == -EAGAIN)
			continue;
		if (got == 0) {
			errno = ECONNRESET;
			return NULL;
		}
		if (got < 0) {
			errno = (int)-got;
			return NULL;
		}
	}
}

static const char *recv_error(int err)
{
	switch (err) {
	case ETIMEDOUT: return "rudad did not answer in time";
	case ECONNRESET: return "rudad closed the connection";
	case EPROTO: return "rudad sent something that is not a reply";
	default: return strerror(err);
	}
}

static int ctl_connect(struct ctl *c, const char *given)
{
	char why[512];
	if (ruda__wire_connect(given,
			       "no socket to try: pass --socket, or set RUDA_SOCKET or "
			       "XDG_RUNTIME_DIR",
			       c->socket, sizeof(c->socket), &c->fd, why, sizeof(why)) != RUDA_OK) {
		fprintf(stderr, "rudactl: %s\n", why);
		return CTL_EXIT_CONNECT;
	}
	if (ruda__frame_reader_init(&c->in) < 0 || ruda__frame_writer_init(&c->out) < 0) {
		fprintf(stderr, "rudactl: out of memory\n");
		return CTL_EXIT_CONNECT;
	}
	Ruda__Hello hello;
	Ruda__Request req;
	ruda__wire_hello(&req, &hello, "rudactl");
	req.id = c->next_id++;
	int err = send_request(c, &req);
	/* even when the send failed: rudad may have said why it closed */
	Ruda__Reply *reply = recv_reply(c);
	if (!reply) {
		int recv_err = errno;
		fprintf(stderr, "rudactl: no session with rudad at %s: %s\n", c->socket,
			err ? strerror(-err) : recv_error(recv_err));
		return CTL_EXIT_CONNECT;
	}
	int rc = CTL_EXIT_OK;
	if (reply->status != RUDA__STATUS__OK) {
		fprintf(stderr, "rudactl: rudad at %s refused the session: %s (%s)\n", c->socket,
			reply->message && *reply->message ? reply->message : "no reason given",
			ruda_strerror((ruda_status)reply->status));
		rc = CTL_EXIT_CONNECT;
	} else if (!ruda__wire_hello_reply(reply)) {
		fprintf(stderr, "rudactl: rudad at %s answered Hello with something else\n",
			c->socket);
		rc = CTL_EXIT_CONNECT;
	} else {
		/* the arena fd came with the reply and was closed: rudactl moves
		 * no bulk data */
		c->session_id = reply->hello->session_id;
		c->arena_size = reply->hello->arena_size;
		c->device_index = reply->hello->device_index;
	}
	ruda__reply__free_unpacked(reply, NULL);
	return rc;
}

static void ctl_close(struct ctl *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	ruda__frame_reader_finish(&c->in);
	ruda__frame_writer_finish(&c->out);
}

int ctl_admin(struct ctl *c, Ruda__Admin *admin, Ruda__AdminReply__BodyCase want,
	      Ruda__Reply **out)
{
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = c->next_id++;
	req.body_case = RUDA__REQUEST__BODY_ADMIN;
	req.admin = admin;
	int err = send_request(c, &req);
	if (err) {
		fprintf(stderr, "rudactl: %s: cannot send to rudad: %s\n", c->command,
			strerror(-err));
		return CTL_EXIT_DAEMON;
	}
	Ruda__Reply *reply;
	do
		reply = recv_reply(c);
	while (reply && reply->id != req.id && (ruda__reply__free_unpacked(reply, NULL), 1));
	if (!reply) {
		fprintf(stderr, "rudactl: %s: %s\n", c->command, recv_error(errno));
		return CTL_EXIT_DAEMON;
	}
	if (reply->status != RUDA__STATUS__OK) {
		fprintf(stderr, "rudactl: %s: %s (%s)\n", c->command,
			reply->message && *reply->message ? reply->message : "refused",
			ruda_strerror((ruda_status)reply->status));
		ruda__reply__free_unpacked(reply, NULL);
		return CTL_EXIT_DAEMON;
	}
	if (reply->body_case != RUDA__REPLY__BODY_ADMIN || reply->admin->body_case != want) {
		fprintf(stderr, "rudactl: %s: rudad answered with an unexpected reply\n",
			c->command);
		ruda__reply__free_unpacked(reply, NULL);
		return CTL_EXIT_DAEMON;
	}
	*out = reply;
	return CTL_EXIT_OK;
}

/* ---- snapshots --------------------------------------------------------------- */

static int cmp_client(const void *a, const void *b)
{
	uint64_t x = (*(Ruda__AdminClient *const *)a)->id;
	uint64_t y = (*(Ruda__AdminClient *const *)b)->id;
	return x < y ? -1 : x > y;
}

static int fetch_clients(struct ctl *c, struct snapshot *snap)
{
	uint64_t after = 0;
	for (;;) {
		Ruda__AdminClients q = RUDA__ADMIN_CLIENTS__INIT;
		q.after = after;
		Ruda__Admin a = RUDA__ADMIN__INIT;
		a.body_case = RUDA__ADMIN__BODY_CLIENTS;
		a.clients = &q;
		Ruda__Reply *reply;
		int rc = ctl_admin(c, &a, RUDA__ADMIN_REPLY__BODY_CLIENTS, &reply);
		if (rc)
			return rc;
		Ruda__Reply **pages = realloc(snap->client_pages,
					      (snap->npages + 1) * sizeof(*pages));
		Ruda__AdminClientsReply *cr = reply->admin->clients;
		Ruda__AdminClient **list =
			realloc(snap->clients, (snap->nclients + cr->n_clients + 1) * sizeof(*list));
		if (pages)
			snap->client_pages = pages;
		if (list)
			snap->clients = list;
		if (!pages || !list) {
			ruda__reply__free_unpacked(reply, NULL);
			fprintf(stderr, "rudactl: out of memory\n");
			return CTL_EXIT_DAEMON;
		}
		snap->client_pages[snap->npages++] = reply;
		for (size_t i = 0; i < cr->n_clients; i++) {
			if (cr->clients[i]->id > after)
				after = cr->clients[i]->id;
			if (cr->clients[i]->id != c->session_id)
				snap->clients[snap->nclients++] = cr->clients[i];
		}
		if (!cr->more || !cr->n_clients)
			break;
	}
	qsort(snap->clients, snap->nclients, sizeof(*snap->clients), cmp_client);
	return CTL_EXIT_OK;
}

int snapshot_take(struct ctl *c, struct snapshot *snap, unsigned what)
{
	memset(snap, 0, sizeof(*snap));
	Ruda__Admin a = RUDA__ADMIN__INIT;
	Ruda__AdminStatus status = RUDA__ADMIN_STATUS__INIT;
	a.body_case = RUDA__ADMIN__BODY_STATUS;
	a.status = &status;
	int rc = ctl_admin(c, &a, RUDA__ADMIN_REPLY__BODY_STATUS, &snap->status_reply);
	if (rc)
		return rc;
	snap->taken = now_s();
	snap->status = snap->status_reply->admin->status;
	/* leave our own connection out of the counts */
	if (snap->status->sessions)
		snap->status->sessions--;
	for (size_t i = 0; i < snap->status->n_devices; i++) {
		Ruda__AdminDevice *d = snap->status->devices[i];
		if (d->index != c->device_index)
			continue;
		if (d->clients)
			d->clients--;
		if (d->arenas) {
			d->arenas--;
			d->arena_bytes -= d->arena_bytes >= c->arena_size ? c->arena_size : 0;
		}
	}
	if ((what & SNAP_CLIENTS) && (rc = fetch_clients(c, snap)))
		return rc;
	if (what & SNAP_MEMORY) {
		Ruda__AdminMemory m = RUDA__ADMIN_MEMORY__INIT;
		a.body_case = RUDA__ADMIN__BODY_MEMORY;
		a.memory = &m;
		rc = ctl_admin(c, &a, RUDA__ADMIN_REPLY__BODY_MEMORY, &snap->memory_reply);
		if (rc)
			return rc;
		snap->memory = snap->memory_reply->admin->memory;
		for (size_t i = 0; i < snap->memory->n_devices; i++) {
			Ruda__AdminMemoryDevice *d = snap->memory->devices[i];
			if (d->index == c->device_index && d->arenas) {
				d->arenas--;
				d->arena_bytes -= d->arena_bytes >= c->arena_size ? c->arena_size : 0;
			}
		}
	}
	if (what & SNAP_CACHE) {
		Ruda__AdminCache q = RUDA__ADMIN_CACHE__INIT;
		a.body_case = RUDA__ADMIN__BODY_CACHE;
		a.cache = &q;
		rc = ctl_admin(c, &a, RUDA__ADMIN_REPLY__BODY_CACHE, &snap->cache_reply);
		if (rc)
			return rc;
		snap->cache = snap->cache_reply->admin->cache;
	}
	return CTL_EXIT_OK;
}

void snapshot_free(struct snapshot *snap)
{
	if (snap->status_reply)
		ruda__reply__free_unpacked(snap->status_reply, NULL);
	for (size_t i = 0; i < snap->npages; i++)
		ruda__reply__free_unpacked(snap->client_pages[i], NULL);
	free(snap->client_pages);
	free(snap->clients);
	if (snap->memory_reply)
		ruda__reply__free_unpacked(snap->memory_reply, NULL);
	if (snap->cache_reply)
		ruda__reply__free_unpacked(snap->cache_reply, NULL);
	memset(snap, 0, sizeof(*snap));
}

const Ruda__AdminClient *snapshot_client(const struct snapshot *snap, uint64_t id)
{
	size_t lo = 0, hi = snap->nclients;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (snap->clients[mid]->id == id)
			return snap->clients[mid];
		if (snap->clients[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

double snapshot_busy(const struct snapshot *before, const struct snapshot *now,
		     uint32_t device, double *client_share)
{
	if (!before || !before->status || now->taken <= before->taken) {
		if (client_share)
			for (size_t i = 0; i < now->nclients; i++)
				client_share[i] = -1;
		return -1;
	}
	double window_ns = (now->taken - before->taken) * 1e9;
	double used = 0;
	for (size_t i = 0; i < now->nclients; i++) {
		const Ruda__AdminClient *c = now->clients[i];
		const Ruda__AdminClient *p = snapshot_client(before, c->id);
		/* a client that was not there before started in between */
		uint64_t prev = p ? p->gpu_time_ns : 0;
		double delta = c->gpu_time_ns > prev ? (double)(c->gpu_time_ns - prev) : 0;
		if (client_share)
			client_share[i] = delta / window_ns;
		if (c->has_device && c->device == device)
			used += delta;
	}
	double busy = used / window_ns;
	return busy > 1 ? 1 : busy;
}

/* ---- human output ------------------------------------------------------------- */

static const Ruda__AdminCacheDevice *cache_device(const struct snapshot *snap, uint32_t index)
{
	for (size_t i = 0; snap->cache && i < snap->cache->n_devices; i++)
		if (snap->cache->devices[i]->index == index)
			return snap->cache->devices[i];
	return NULL;
}

/* The loop thread's busy time (over the sample too, when there is one)
 * and what vkQueueSubmit took of it: whether the one loop thread is what
 * limits many clients. */
static void print_loop(const struct snapshot *snap, const struct snapshot *before,
		       uint64_t submits, uint64_t submit_ns)
{
	const Ruda__AdminStatusReply *s = snap->status;
	char a[32];
	printf("loop      busy %s since start", fmt_ns(a, sizeof(a), s->loop_busy_ns));
	if (before && before->status && snap->taken > before->taken &&
	    s->loop_busy_ns >= before->status->loop_busy_ns)
		printf(" (%.0f%% of the last %s)",
		       (double)(s->loop_busy_ns - before->status->loop_busy_ns) /
			       ((snap->taken - before->taken) * 1e9) * 100.0,
		       fmt_ms(a, sizeof(a), (uint64_t)((snap->taken - before->taken) * 1000.0)));
	printf("; %" PRIu64 " queue submits", submits);
	if (submits)
		printf(", %.1f us each", (double)submit_ns / (double)submits / 1000.0);
	printf("; %" PRIu64 " turns yielded; between turns %" PRIu64 " completions, %" PRIu64
	       " syncs submitted; %s in clients' turns\n",
	       s->turns_yielded, s->completions_between_turns, s->syncs_submitted_early,
	       fmt_ns(a, sizeof(a), s->turns_ns));
	printf("          longest pass %s; %" PRIu64 " passes of 50 ms or more (rudad's log says "
	       "where their time went)\n",
	       fmt_ns(a, sizeof(a), s->longest_pass_ns), s->slow_passes);
}

static void print_status(const struct snapshot *snap, const struct snapshot *before)
{
	const Ruda__AdminStatusReply *s = snap->status;
	char a[32], b[32], t[32];
	printf("rudad %s, protocol %u, pid %d, up %s\n", s->daemon_version, s->protocol_version,
	       s->pid, fmt_ms(t, sizeof(t), s->uptime_ms));
	printf("socket    %s\n", *s->socket ? s->socket : "(unnamed)");
	printf("clients   %u connected (%s)\n", s->sessions,
	       s->draining ? "draining: no new clients" : "accepting new clients");
	printf("limits    arena %s and %u buffers per client\n",
	       fmt_bytes(a, sizeof(a), s->arena_size), s->max_buffers);
	uint64_t bytes = 0, buffers = 0, arena = 0, imported = 0, pipelines = 0, compiled = 0,
		 hits = 0, peer = 0, staged = 0, submits = 0, submit_ns = 0;
	for (size_t i = 0; i < s->n_devices; i++) {
		bytes += s->devices[i]->buffer_bytes;
		buffers += s->devices[i]->buffers;
		arena += s->devices[i]->arena_bytes;
		imported += s->devices[i]->arena_imported_bytes;
		peer += s->devices[i]->peer_copy_bytes;
		staged += s->devices[i]->staged_copy_bytes;
		submits += s->devices[i]->queue_submits;
		submit_ns += s->devices[i]->submit_ns;
		const Ruda__AdminCacheDevice *cd = cache_device(snap, s->devices[i]->index);
		if (cd) {
			pipelines += cd->entries;
			compiled += cd->compiled;
			hits += cd->hits;
		}
	}
	printf("memory    %s in %" PRIu64 " buffers; arenas %s (%s imported)\n",
	       fmt_bytes(a, sizeof(a), bytes), buffers, fmt_bytes(b, sizeof(b), arena),
	       fmt_bytes(t, sizeof(t), imported));
	printf("staging   %s in %u regions (%u being imported)\n",
	       fmt_bytes(a, sizeof(a), s->staging_bytes), s->staging_regions, s->staging_importing);
	if (s->n_devices > 1)
		printf("between   %s by device copy, %s through host staging; %u shared "
		       "windows (%s)\n",
		       fmt_bytes(a, sizeof(a), peer), fmt_bytes(b, sizeof(b), staged),
		       s->peer_windows, fmt_bytes(t, sizeof(t), s->peer_window_bytes));
	if (snap->cache)
		printf("cache     %" PRIu64 " pipelines, %" PRIu64 " compiled, %" PRIu64 " hits\n",
		       pipelines, compiled, hits);
	print_loop(snap, before, submits, submit_ns);
	printf("admin     %s\n\n", s->admin ? "yes (this user may run commands)"
					  : "no (views only)");

	static const char *const headers[] = {"DEV", "NAME", "TYPE", "CLIENTS", "MEMORY",
					      "BUFFERS", "IN FLIGHT", "BUSY", "GPU TIME"};
	struct table tab;
	table_init(&tab, 9, headers, "rllrrrrrr");
	for (size_t i = 0; i < s->n_devices; i++) {
		const Ruda__AdminDevice *d = s->devices[i];
		double busy = snapshot_busy(before, snap, d->index, NULL);
		uint64_t gpu = 0;
		for (size_t k = 0; k < snap->nclients; k++)
			if (snap->clients[k]->has_device && snap->clients[k]->device == d->index)
				gpu += snap->clients[k]->gpu_time_ns;
		table_cell(&tab, "%u", d->index);
		table_cell(&tab, "%s", d->name);
		table_cell(&tab, "%s", d->type);
		table_cell(&tab, "%u", d->clients);
		table_cell(&tab, "%s", fmt_bytes(a, sizeof(a), d->buffer_bytes));
		table_cell(&tab, "%" PRIu64, d->buffers);
		table_cell(&tab, "%" PRIu64, d->inflight);
		if (d->lost)
			table_cell(&tab, "lost");
		else if (busy < 0)
			table_cell(&tab, "-");
		else
			table_cell(&tab, "%.0f%%", busy * 100);
		table_cell(&tab, "%s", fmt_ns(t, sizeof(t), gpu));
	}
	table_print(&tab, stdout);
	table_finish(&tab);
}

static void print_clients(const struct snapshot *snap)
{
	static const char *const headers[] = {"ID",     "PID",    "UID",       "NAME",
					      "DEV",    "AGE",    "IDLE",      "STREAMS",
					      "BUFFERS", "MEMORY", "IN FLIGHT", "LAUNCHES",
					      "GPU TIME", "ARENA", "STAGING", "QUOTA",  "PRIO"};
	struct table t;
	table_init(&t, 17, headers, "rrrlrrrrrrrrrrrrr");
	for (size_t i = 0; i < snap->nclients; i++) {
		const Ruda__AdminClient *c = snap->clients[i];
		char a[32];
		table_cell(&t, "%" PRIu64, c->id);
		table_cell(&t, "%d", c->pid);
		table_cell(&t, "%u", c->uid);
		if (strcmp(c->state, "ready"))
			table_cell(&t, "%s (%s)", c->name, c->state);
		else
			table_cell(&t, "%s", c->name);
		if (c->has_device)
			table_cell(&t, "%u", c->device);
		else
			table_cell(&t, "-");
		table_cell(&t, "%s", fmt_ms(a, sizeof(a), c->age_ms));
		table_cell(&t, "%s", fmt_ms(a, sizeof(a), c->idle_ms));
		table_cell(&t, "%u", c->streams);
		table_cell(&t, "%" PRIu64, c->buffers);
		table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->bytes));
		table_cell(&t, "%u%s", c->inflight, c->recording ? "+" : "");
		table_cell(&t, "%" PRIu64, c->launches);
		table_cell(&t, "%s", fmt_ns(a, sizeof(a), c->gpu_time_ns));
		table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->arena_size));
		table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->staging_bytes));
		if (c->quota_bytes)
			table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->quota_bytes));
		else
			table_cell(&t, "none");
		table_cell(&t, "%u", c->priority);
	}
	table_print(&t, stdout);
	table_finish(&t);
	if (!snap->nclients)
		printf("(no clients connected)\n");
}

static void print_heaps(Ruda__AdminHeap *const *heaps, size_t n)
{
	char a[32];
	for (size_t i = 0; i < n; i++)
		printf("  %-14s %s%s\n", i == 0 ? "heaps" : "", fmt_bytes(a, sizeof(a), heaps[i]->size),
		       heaps[i]->device_local ? " device-local" : " host");
}

static void print_devices(const struct snapshot *snap)
{
	const Ruda__AdminStatusReply *s = snap->status;
	for (size_t i = 0; i < s->n_devices; i++) {
		const Ruda__AdminDevice *d = s->devices[i];
		char a[32], b[32], c[32], v[32], uuid[40];
		if (i)
			printf("\n");
		printf("device %u: %s\n", d->index, d->name);
		printf("  %-14s %s (vendor 0x%04x, device 0x%04x)\n", "type", d->type, d->vendor_id,
		       d->device_id);
		printf("  %-14s %s %u; physical device %u\n", "id", d->type, d->type_index,
		       d->physical_index);
		printf("  %-14s %s, driver 0x%08x\n", "vulkan",
		       fmt_vk_version(v, sizeof(v), d->api_version), d->driver_version);
		printf("  %-14s %s\n", "cache uuid",
		       fmt_hex(uuid, sizeof(uuid), d->pipeline_cache_uuid.data,
			       d->pipeline_cache_uuid.len));
		printf("  %-14s %s\n", "host import",
		       d->host_import ? "yes (arenas are DMA'd directly)" : "no");
		printf("  %-14s buffer %s, binding %s, push constants %u B, %u bindings\n", "largest",
		       fmt_bytes(a, sizeof(a), d->max_buffer_size),
		       fmt_bytes(b, sizeof(b), d->max_storage_buffer_range),
		       d->max_push_constants_size, d->max_bindings);
		if (d->n_max_workgroup_count == 3 && d->n_max_workgroup_size == 3)
			printf("  %-14s count %u x %u x %u, size %u x %u x %u, %u invocations, "
			       "subgroup %u\n",
			       "workgroups", d->max_workgroup_count[0], d->max_workgroup_count[1],
			       d->max_workgroup_count[2], d->max_workgroup_size[0],
			       d->max_workgroup_size[1], d->max_workgroup_size[2],
			       d->max_workgroup_invocations, d->subgroup_size);
		print_heaps(d->heaps, d->n_heaps);
		printf("  %-14s %s in %" PRIu64 " buffers; arenas %s (%u), ", "memory",
		       fmt_bytes(a, sizeof(a), d->buffer_bytes), d->buffers,
		       fmt_bytes(c, sizeof(c), d->arena_bytes), d->arenas);
		printf("%s imported (%u)\n", fmt_bytes(c, sizeof(c), d->arena_imported_bytes),
		       d->arenas_imported);
		printf("  %-14s %" PRIu64 " in flight; %" PRIu64 " submitted, %" PRIu64
		       " completed%s\n",
		       "queue", d->inflight, d->submitted, d->completed,
		       d->lost ? "; DEVICE LOST" : "");
		printf("  %-14s %" PRIu64 " vkQueueSubmit calls, %s in them; %s on completions\n",
		       "submits", d->queue_submits, fmt_ns(a, sizeof(a), d->submit_ns),
		       fmt_ns(c, sizeof(c), d->completion_ns));
		if (d->lane_rounds)
			printf("  %-14s %" PRIu64 " submissions, %" PRIu64 " rounds, %" PRIu64
			       " launches (%.2f a round), %s recording them\n",
			       "lanes", d->lane_submissions, d->lane_rounds, d->lane_launches,
			       (double)d->lane_launches / (double)d->lane_rounds,
			       fmt_ns(a, sizeof(a), d->lane_record_ns));
		if (d->lane_gpu_ns) {
			char idle[32];
			printf("  %-14s %s on the device, queues idle %s between them\n", "",
			       fmt_ns(a, sizeof(a), d->lane_gpu_ns),
			       fmt_ns(idle, sizeof(idle), d->lane_idle_ns));
		}
		printf("  %-14s %" PRIu64 " pipelines, %" PRIu64 " compiled\n", "kernels",
		       d->pipelines, d->kernels_compiled);
		printf("  %-14s %u\n", "clients", d->clients);
	}
}

static void print_memory(const struct snapshot *snap)
{
	char a[32], b[32];
	for (size_t i = 0; i < snap->memory->n_devices; i++) {
		const Ruda__AdminMemoryDevice *m = snap->memory->devices[i];
		printf("device %u: %s\n", m->index, m->name);
		print_heaps(m->heaps, m->n_heaps);
		printf("  %-14s %s in %" PRIu64 " buffers; %s zero-filled since start\n",
		       "buffers", fmt_bytes(a, sizeof(a), m->buffer_bytes), m->buffers,
		       fmt_bytes(b, sizeof(b), m->zero_filled_bytes));
		printf("  %-14s %s in %" PRIu64 " pages (%" PRIu64 " empty), %s of it free\n",
		       "reserved", fmt_bytes(a, sizeof(a), m->reserved_bytes), m->pages,
		       m->empty_pages, fmt_bytes(b, sizeof(b), m->free_bytes));
		printf("  %-14s %s shared pages; buffers over %s get their own; %u empty "
		       "kept\n",
		       "pool", fmt_bytes(a, sizeof(a), m->page_size),
		       fmt_bytes(b, sizeof(b), m->max_shared), m->keep_empty);
		printf("  %-14s %s of freed buffers' own pages, for the next of their size "
		       "(up to %s, %.1f s each)\n",
		       "kept", fmt_bytes(a, sizeof(a), m->kept_bytes),
		       fmt_bytes(b, sizeof(b), m->kept_max_bytes), m->kept_for_ms / 1000.0);
		printf("  %-14s %s in %u arenas (host pages shared with clients); %s in %u "
		       "imported (pinned at their first transfer)\n\n",
		       "arenas", fmt_bytes(a, sizeof(a), m->arena_bytes), m->arenas,
		       fmt_bytes(b, sizeof(b), m->arena_imported_bytes), m->arenas_imported);
	}
	static const char *const headers[] = {"ID",     "NAME",  "UID",     "DEV",  "BUFFERS",
					      "MEMORY", "ARENA", "STAGING", "QUOTA"};
	struct table t;
	table_init(&t, 9, headers, "rlrrrrrrr");
	for (size_t i = 0; i < snap->nclients; i++) {
		const Ruda__AdminClient *c = snap->clients[i];
		table_cell(&t, "%" PRIu64, c->id);
		table_cell(&t, "%s", c->name);
		table_cell(&t, "%u", c->uid);
		if (c->has_device)
			table_cell(&t, "%u", c->device);
		else
			table_cell(&t, "-");
		table_cell(&t, "%" PRIu64, c->buffers);
		table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->bytes));
		table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->arena_size));
		table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->staging_bytes));
		if (c->quota_bytes)
			table_cell(&t, "%s", fmt_bytes(a, sizeof(a), c->quota_bytes));
		else
			table_cell(&t, "none");
	}
	table_print(&t, stdout);
	table_finish(&t);
	if (!snap->nclients)
		printf("(no clients connected)\n");
}

static void print_cache(const struct snapshot *snap)
{
	char a[32], b[32], hex[40];
	for (size_t i = 0; i < snap->cache->n_devices; i++) {
		const Ruda__AdminCacheDevice *m = snap->cache->devices[i];
		uint64_t misses = m->compiled + m->compiling;
		uint64_t lookups = m->hits + misses;
		if (i)
			printf("\n");
		printf("device %u: %s\n", m->index, m->name);
		printf("  %-14s %" PRIu64 " (%" PRIu64 " modules): %" PRIu64 " ready, %" PRIu64
		       " compiling, %" PRIu64 " unused\n",
		       "pipelines", m->entries, m->modules, m->ready, m->compiling, m->unused);
		printf("  %-14s %" PRIu64 " hits, %" PRIu64 " misses", "lookups", m->hits, misses);
		if (lookups)
			printf(" (%.0f%% hits)", 100.0 * (double)m->hits / (double)lookups);
		printf("\n  %-14s %s in %" PRIu64 " compilations", "compile time",
		       fmt_ns(a, sizeof(a), m->compile_ns), m->compiled);
		if (m->compiled)
			printf(", %s each on average",
			       fmt_ns(b, sizeof(b), m->compile_ns / m->compiled));
		if (!*m->file)
			printf("\n  %-14s none (kept in memory only)\n\n", "file");
		else if (m->file_bytes)
			printf("\n  %-14s %s (%s)\n\n", "file", m->file,
			       fmt_bytes(a, sizeof(a), m->file_bytes));
		else
			printf("\n  %-14s %s (not loaded or saved yet)\n\n", "file", m->file);
		static const char *const headers[] = {"MODULE", "ENTRY", "BINDINGS", "PUSH",
						      "SPEC",   "SPIR-V", "STATE",   "REFS",
						      "COMPILE"};
		struct table t;
		table_init(&t, 9, headers, "llrrrrlrr");
		for (size_t k = 0; k < m->n_pipelines; k++) {
			const Ruda__AdminPipeline *p = m->pipelines[k];
			table_cell(&t, "%s",
				   fmt_hex(hex, sizeof(hex), p->module_sha256.data,
					   p->module_sha256.len < 8 ? p->module_sha256.len : 8));
			table_cell(&t, "%s", p->entry_point);
			table_cell(&t, "%u", p->binding_count);
			table_cell(&t, "%u B", p->push_constant_size);
			table_cell(&t, "%u", p->spec_constants);
			table_cell(&t, "%s", fmt_bytes(a, sizeof(a), p->spirv_size));
			table_cell(&t, "%s", p->state);
			table_cell(&t, "%u", p->references);
			table_cell(&t, "%s", fmt_ns(b, sizeof(b), p->compile_ns));
		}
		table_print(&t, stdout);
		table_finish(&t);
		if (!m->n_pipelines)
			printf("(no pipelines)\n");
		else if (m->n_pipelines < m->pipelines_total)
			printf("(%" PRIu64 " more not listed)\n", m->pipelines_total - m->n_pipelines);
	}
}

/* ---- JSON output of the views ---------------------------------------------- */

static void json_status(const struct snapshot *snap, const struct snapshot *before)
{
	struct json j;
	json_begin(&j, stdout, "status");
	json_daemon(&j, snap->status);
	json_array(&j, "devices");
	for (size_t i = 0; i < snap->status->n_devices; i++)
		json_device(&j, snap->status->devices[i],
			    snapshot_busy(before, snap, snap->status->devices[i]->index, NULL));
	json_array_end(&j);
	json_array(&j, "clients");
	for (size_t i = 0; i < snap->nclients; i++)
		json_client(&j, snap->clients[i]);
	json_array_end(&j);
	json_array(&j, "caches");
	for (size_t i = 0; snap->cache && i < snap->cache->n_devices; i++)
		json_cache_device(&j, snap->cache->devices[i]);
	json_array_end(&j);
	json_end(&j);
}

static void json_clients(const struct snapshot *snap)
{
	struct json j;
	json_begin(&j, stdout, "clients");
	json_array(&j, "clients");
	for (size_t i = 0; i < snap->nclients; i++)
		json_client(&j, snap->clients[i]);
	json_array_end(&j);
	json_end(&j);
}

static void json_devices(const struct snapshot *snap)
{
	struct json j;
	json_begin(&j, stdout, "devices");
	json_array(&j, "devices");
	for (size_t i = 0; i < snap->status->n_devices; i++)
		json_device(&j, snap->status->devices[i], -1);
	json_array_end(&j);
	json_end(&j);
}

static void json_memory(const struct snapshot *snap)
{
	struct json j;
	json_begin(&j, stdout, "memory");
	json_array(&j, "devices");
	for (size_t i = 0; i < snap->memory->n_devices; i++)
		json_memory_device(&j, snap->memory->devices[i]);
	json_array_end(&j);
	json_array(&j, "clients");
	for (size_t i = 0; i < snap->nclients; i++) {
		const Ruda__AdminClient *c = snap->clients[i];
		json_object(&j, NULL);
		json_u64(&j, "id", c->id);
		json_str(&j, "name", c->name);
		json_u64(&j, "uid", c->uid);
		json_u64_or_null(&j, "device", c->has_device, c->device);
		json_u64(&j, "buffers", c->buffers);
		json_u64(&j, "bytes", c->bytes);
		json_u64(&j, "arena_bytes", c->arena_size);
		json_u64(&j, "staging_bytes", c->staging_bytes);
		json_quota(&j, "quota_bytes", c->quota_bytes);
		json_quota(&j, "uid_quota_bytes", c->quota_uid_bytes);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_end(&j);
}

static void json_cache(const struct snapshot *snap)
{
	struct json j;
	json_begin(&j, stdout, "cache");
	json_array(&j, "devices");
	for (size_t i = 0; i < snap->cache->n_devices; i++)
		json_cache_device(&j, snap->cache->devices[i]);
	json_array_end(&j);
	json_end(&j);
}

/* ---- commands ------------------------------------------------------------------ */

struct options {
	const char *socket;
	bool json;
	int timeout_ms;
	int sample_ms;
	struct top_options top;
};

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int cmd_view(struct ctl *c, const struct options *o, const char *cmd)
{
	struct snapshot snap, before = {0};
	int rc;
	if (!strcmp(cmd, "status")) {
		/* busy: the GPU time clients used over a short sample */
		if (o->sample_ms > 0) {
			if ((rc = snapshot_take(c, &before, SNAP_CLIENTS)))
				return rc;
			sleep_ms(o->sample_ms);
		}
		rc = snapshot_take(c, &snap, SNAP_CLIENTS | SNAP_CACHE);
		if (!rc) {
			if (o->json)
				json_status(&snap, o->sample_ms > 0 ? &before : NULL);
			else
				print_status(&snap, o->sample_ms > 0 ? &before : NULL);
		}
		snapshot_free(&before);
	} else if (!strcmp(cmd, "devices")) {
		rc = snapshot_take(c, &snap, 0);
		if (!rc)
			o->json ? json_devices(&snap) : print_devices(&snap);
	} else if (!strcmp(cmd, "clients")) {
		rc = snapshot_take(c, &snap, SNAP_CLIENTS);
		if (!rc)
			o->json ? json_clients(&snap) : print_clients(&snap);
	} else if (!strcmp(cmd, "memory")) {
		rc = snapshot_take(c, &snap, SNAP_CLIENTS | SNAP_MEMORY);
		if (!rc)
			o->json ? json_memory(&snap) : print_memory(&snap);
	} else {
		rc = snapshot_take(c, &snap, SNAP_CACHE);
		if (!rc)
			o->json ? json_cache(&snap) : print_cache(&snap);
	}
	snapshot_free(&snap);
	return rc;
}

static int cmd_kill(struct ctl *c, const struct options *o, uint64_t id)
{
	Ruda__AdminKill k = RUDA__ADMIN_KILL__INIT;
	k.client = id;
	Ruda__Admin a = RUDA__ADMIN__INIT;
	a.body_case = RUDA__ADMIN__BODY_KILL;
	a.kill = &k;
	Ruda__Reply *reply;
	int rc = ctl_admin(c, &a, RUDA__ADMIN_REPLY__BODY_KILL, &reply);
	if (rc)
		return rc;
	const Ruda__AdminKillReply *r = reply->admin->kill;
	if (o->json) {
		struct json j;
		json_begin(&j, stdout, "kill");
		json_u64(&j, "client", r->client);
		json_str(&j, "name", r->name);
		json_i64(&j, "pid", r->pid);
		json_u64(&j, "uid", r->uid);
		json_u64(&j, "buffers", r->buffers);
		json_u64(&j, "bytes", r->bytes);
		json_end(&j);
	} else {
		char a1[32];
		printf("killed client %" PRIu64 " (\"%s\", pid %d, uid %u): %" PRIu64
		       " buffers, %s released once its GPU work completes\n",
		       r->client, r->name, r->pid, r->uid, r->buffers,
		       fmt_bytes(a1, sizeof(a1), r->bytes));
	}
	ruda__reply__free_unpacked(reply, NULL);
	return CTL_EXIT_OK;
}

static int cmd_simple(struct ctl *c, const struct options *o, const char *cmd)
{
	Ruda__Admin a = RUDA__ADMIN__INIT;
	Ruda__AdminCleanup cleanup = RUDA__ADMIN_CLEANUP__INIT;
	Ruda__AdminDrain drain = RUDA__ADMIN_DRAIN__INIT;
	Ruda__AdminShutdown shutdown = RUDA__ADMIN_SHUTDOWN__INIT;
	Ruda__AdminReply__BodyCase want;
	if (!strcmp(cmd, "cleanup")) {
		a.body_case = RUDA__ADMIN__BODY_CLEANUP;
		a.cleanup = &cleanup;
		want = RUDA__ADMIN_REPLY__BODY_CLEANUP;
	} else if (!strcmp(cmd, "drain")) {
		a.body_case = RUDA__ADMIN__BODY_DRAIN;
		a.drain = &drain;
		want = RUDA__ADMIN_REPLY__BODY_DRAIN;
	} else {
		a.body_case = RUDA__ADMIN__BODY_SHUTDOWN;
		a.shutdown = &shutdown;
		want = RUDA__ADMIN_REPLY__BODY_SHUTDOWN;
	}
	Ruda__Reply *reply;
	int rc = ctl_admin(c, &a, want, &reply);
	if (rc)
		return rc;
	const Ruda__AdminReply *r = reply->admin;
	struct json j;
	char b[32];
	if (o->json)
		json_begin(&j, stdout, cmd);
	if (want == RUDA__ADMIN_REPLY__BODY_CLEANUP) {
		if (o->json) {
			json_u64(&j, "bytes_freed", r->cleanup->bytes_freed);
			json_u64(&j, "pipelines_dropped", r->cleanup->pipelines_dropped);
		} else {
			printf("cleanup: %s of device memory freed, %" PRIu64
			       " unused pipelines dropped\n",
			       fmt_bytes(b, sizeof(b), r->cleanup->bytes_freed),
			       r->cleanup->pipelines_dropped);
		}
	} else {
		uint32_t others = want == RUDA__ADMIN_REPLY__BODY_DRAIN ? r->drain->sessions
									: r->shutdown->sessions;
		others = others ? others - 1 : 0; /* not this connection */
		if (o->json)
			json_u64(&j, "clients", others);
		else if (want == RUDA__ADMIN_REPLY__BODY_DRAIN)
			printf("draining: rudad accepts no new clients; %u connected clients may "
			       "finish\n",
			       others);
		else
			printf("rudad is shutting down (%u clients were connected)\n", others);
	}
	if (o->json)
		json_end(&j);
	ruda__reply__free_unpacked(reply, NULL);
	return CTL_EXIT_OK;
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: rudactl [OPTION]... COMMAND [ARG]\n"
		"Inspect and manage a running rudad.\n\n"
		"Views (anyone, unless the daemon's policy says otherwise):\n"
		"  status             the daemon, its devices, clients, memory and cache\n"
		"  devices            properties and memory of every device\n"
		"  clients            every connected client and what it uses\n"
		"  memory             heaps, memory pages, arenas and memory per client\n"
		"  cache              the compiled kernel (pipeline) cache\n"
		"  top                a live view of clients and device load; q quits\n"
		"  metrics            every counter in Prometheus text format\n"
		"Commands (root or the daemon's admin group):\n"
		"  kill CLIENT        disconnect client id CLIENT and free what it holds\n"
		"  cleanup            release cached resources nobody uses\n"
		"  drain              accept no new clients; exit when the last one leaves\n"
		"  shutdown           stop rudad, as SIGTERM does\n\n"
		"Options:\n"
		"  -s, --socket=PATH       rudad's socket (default: $RUDA_SOCKET, else\n"
		"                          /run/ruda/rudad.sock for root, else\n"
		"                          $XDG_RUNTIME_DIR/ruda/rudad.sock)\n"
		"  -j, --json              machine-readable output (docs/rudactl.md)\n"
		"  -t, --timeout=SECONDS   how long to wait for an answer (default 10)\n"
		"      --sample=MS         status: measure device load over MS ms (default\n"
		"                          200; 0: do not)\n"
		"  -i, --interval=SECONDS  top: time between refreshes (default 2)\n"
		"  -n, --iterations=N      top: exit after N refreshes\n"
		"  -h, --help              this help\n"
		"  -V, --version           the version\n\n"
		"Exit status: 0 ok, 1 the daemon refused or failed, 2 bad usage,\n"
		"3 no daemon could be reached.\n");
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "rudactl: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'rudactl --help'.\n");
	return CTL_EXIT_USAGE;
}

static int parse_seconds(const char *text, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (errno || end == text || *end || !(v > 0) || v > 86400)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	enum { OPT_SAMPLE = 256 };
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"timeout", required_argument, NULL, 't'},
		{"sample", required_argument, NULL, OPT_SAMPLE},
		{"interval", required_argument, NULL, 'i'},
		{"iterations", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	struct options o = {
		.timeout_ms = 10000,
		.sample_ms = 200,
		.top = {.interval = 2.0},
	};
	double seconds;
	char *end;
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":s:jt:i:n:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.socket = optarg;
			break;
		case 'j':
			o.json = true;
			break;
		case 't':
			if (parse_seconds(optarg, &seconds) < 0)
				return bad_usage("--timeout: '%s' is not a number of seconds", optarg);
			o.timeout_ms = (int)ceil(seconds * 1000.0);
			break;
		case OPT_SAMPLE:
			errno = 0;
			o.sample_ms = (int)strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || o.sample_ms < 0 || o.sample_ms > 60000)
				return bad_usage("--sample: '%s' is not 0..60000 milliseconds", optarg);
			break;
		case 'i':
			if (parse_seconds(optarg, &o.top.interval) < 0 || o.top.interval < 0.05)
				return bad_usage("--interval: '%s' is not a number of seconds (at "
						 "least 0.05)",
						 optarg);
			break;
		case 'n':
			errno = 0;
			o.top.iterations = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || o.top.iterations < 1)
				return bad_usage("--iterations: '%s' is not a positive number", optarg);
			break;
		case 'h':
			usage(stdout);
			return CTL_EXIT_OK;
		case 'V':
			printf("rudactl %s\n", RUDA_VERSION);
			return CTL_EXIT_OK;
		case ':':
			return bad_usage("option '%s' needs an argument", argv[optind - 1]);
		default:
			return bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return bad_usage("%s", "no command given");
	const char *cmd = argv[optind++];
	static const char *const views[] = {"status", "devices", "clients", "memory", "cache"};
	static const char *const plain[] = {"cleanup", "drain", "shutdown", "top", "metrics"};
	int known = 0, is_view = 0;
	for (size_t i = 0; i < 5; i++) {
		if (!strcmp(cmd, views[i]))
			known = is_view = 1;
		if (!strcmp(cmd, plain[i]))
			known = 1;
	}
	uint64_t kill_id = 0;
	if (!strcmp(cmd, "kill")) {
		if (optind >= argc)
			return bad_usage("%s", "kill: which client? (an id from 'rudactl clients')");
		const char *arg = argv[optind++];
		errno = 0;
		kill_id = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || !kill_id)
			return bad_usage("kill: '%s' is not a client id", arg);
		known = 1;
	}
	if (!known)
		return bad_usage("unknown command '%s'", cmd);
	if (optind < argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (o.json && (!strcmp(cmd, "top") || !strcmp(cmd, "metrics")))
		return bad_usage("%s has no --json output; try 'status --json'", cmd);

	signal(SIGPIPE, SIG_IGN);
	struct ctl c = {.fd = -1, .command = cmd, .next_id = 1, .timeout_ms = o.timeout_ms};
	int rc = ctl_connect(&c, o.socket);
	if (rc == CTL_EXIT_OK) {
		if (is_view)
			rc = cmd_view(&c, &o, cmd);
		else if (!strcmp(cmd, "kill"))
			rc = cmd_kill(&c, &o, kill_id);
		else if (!strcmp(cmd, "top"))
			rc = ctl_top(&c, &o.top);
		else if (!strcmp(cmd, "metrics"))
			rc = ctl_metrics(&c, stdout);
		else
			rc = cmd_simple(&c, &o, cmd);
	}
	ctl_close(&c);
	if (fflush(stdout) != 0 && rc == CTL_EXIT_OK) {
		fprintf(stderr, "rudactl: writing the output failed: %s\n", strerror(errno));
		rc = CTL_EXIT_DAEMON;
	}
	return rc;
}
