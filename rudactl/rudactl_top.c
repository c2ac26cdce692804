/* rudactl top: a live view of the clients, sorted by GPU time then memory,
 * with a busy bar per device. Plain ANSI escapes and termios raw mode; on a
 * terminal it uses the alternate screen and quits on 'q'. When stdout is not
 * a terminal it prints one frame after another (as top -b does). */
#include "rudactl.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested, resized;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1; /* draw again now, at the new size */
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait `seconds`, reading keys. 1 when the user asked to quit; 0 when the
 * time is up or the terminal was resized. */
static int wait_keys(double seconds, bool *stdin_open)
{
	double deadline = now_s() + seconds;
	for (;;) {
		if (stop_requested)
			return 1;
		if (resized) {
			resized = 0;
			return 0;
		}
		double left = deadline - now_s();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
		int n = poll(&p, *stdin_open ? 1 : 0, (int)(left * 1000.0) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			continue;
		char keys[64];
		ssize_t got = read(STDIN_FILENO, keys, sizeof(keys));
		if (got <= 0) {
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			*stdin_open = false; /* end of input: only the timer is left */
			continue;
		}
		for (ssize_t i = 0; i < got; i++)
			if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3 /* ^C */)
				return 1;
	}
}

/* Screen lines collected for one frame, truncated to the width. */
struct screen {
	char *buf;
	size_t len;
	FILE *f;
	int rows, cols, line;
	bool tty;
};

static void screen_line(struct screen *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void screen_line(struct screen *s, const char *fmt, ...)
{
	if (s->tty && s->line >= s->rows)
		return;
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	size_t n = strlen(text);
	if (s->tty && s->cols > 0 && n > (size_t)s->cols) {
		n = (size_t)s->cols;
		while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
			n--; /* not inside a UTF-8 sequence */
	}
	fwrite(text, 1, n, s->f);
	fputs(s->tty ? "\033[K\n" : "\n", s->f);
	s->line++;
}

struct row {
	const Ruda__AdminClient *c;
	double share;
};

static int cmp_rows(const void *a, const void *b)
{
	const Ruda__AdminClient *x = ((const struct row *)a)->c;
	const Ruda__AdminClient *y = ((const struct row *)b)->c;
	if (x->gpu_time_ns != y->gpu_time_ns)
		return x->gpu_time_ns > y->gpu_time_ns ? -1 : 1;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void render(struct screen *scr, const struct ctl *c, const struct snapshot *before,
		   const struct snapshot *now, double interval)
{
	const Ruda__AdminStatusReply *s = now->status;
	char a[32], b[32], t[32];
	scr->line = 0;
	if (scr->tty)
		fputs("\033[H", scr->f);
	screen_line(scr, "rudactl top - rudad %s on %s - up %s - %u clients%s - every %.1f s - q quits",
		    s->daemon_version, c->socket, fmt_ms(t, sizeof(t), s->uptime_ms), s->sessions,
		    s->draining ? " (draining)" : "", interval);
	screen_line(scr, "%s", "");
	for (size_t i = 0; i < s->n_devices; i++) {
		const Ruda__AdminDevice *d = s->devices[i];
		double busy = snapshot_busy(before, now, d->index, NULL);
		int width = scr->cols > 60 ? (scr->cols - 40 < 50 ? scr->cols - 40 : 50) : 20;
		char bar[64];
		int fill = busy > 0 ? (int)(busy * width + 0.5) : 0;
		for (int k = 0; k < width; k++)
			bar[k] = k < fill ? '#' : '.';
		bar[width] = '\0';
		screen_line(scr, "dev %u  %s (%s)", d->index, d->name, d->type);
		if (d->lost)
			screen_line(scr, "  [%s]  LOST", bar);
		else if (busy < 0)
			screen_line(scr, "  [%s]     -  %u clients", bar, d->clients);
		else
			screen_line(scr, "  [%s] %5.1f%%  %u clients", bar, busy * 100, d->clients);
		screen_line(scr, "  memory %s in %" PRIu64 " buffers, arenas %s, %" PRIu64
				 " in flight, %" PRIu64 " pipelines",
			    fmt_bytes(a, sizeof(a), d->buffer_bytes), d->buffers,
			    fmt_bytes(b, sizeof(b), d->arena_bytes), d->inflight, d->pipelines);
	}
	screen_line(scr, "%s", "");

	struct row *rows = calloc(now->nclients ? now->nclients : 1, sizeof(*rows));
	double *share = calloc(now->nclients ? now->nclients : 1, sizeof(*share));
	if (!rows || !share) {
		free(rows);
		free(share);
		screen_line(scr, "(out of memory)");
		return;
	}
	snapshot_busy(before, now, 0, share);
	for (size_t i = 0; i < now->nclients; i++)
		rows[i] = (struct row){now->clients[i], share[i]};
	qsort(rows, now->nclients, sizeof(*rows), cmp_rows);
	if (scr->tty)
		fputs("\033[7m", scr->f); /* the header in reverse video */
	screen_line(scr, "%6s %7s %6s %-16s %3s %10s %5s %10s %5s %9s %4s %8s", "ID", "PID",
		    "UID", "NAME", "DEV", "GPU TIME", "GPU%", "MEMORY", "BUFS", "LAUNCHES", "INFL",
		    "IDLE");
	if (scr->tty)
		fputs("\033[0m", scr->f);
	for (size_t i = 0; i < now->nclients; i++) {
		const Ruda__AdminClient *cl = rows[i].c;
		char dev[8] = "-", gpu[16] = "-", mem[32], idle[32], gt[32];
		if (cl->has_device)
			snprintf(dev, sizeof(dev), "%u", cl->device);
		if (rows[i].share >= 0)
			snprintf(gpu, sizeof(gpu), "%.1f", rows[i].share * 100);
		screen_line(scr, "%6" PRIu64 " %7d %6u %-16.16s %3s %10s %5s %10s %5" PRIu64
				 " %9" PRIu64 " %3u%s %8s",
			    cl->id, cl->pid, cl->uid, cl->name, dev,
			    fmt_ns(gt, sizeof(gt), cl->gpu_time_ns), gpu,
			    fmt_bytes(mem, sizeof(mem), cl->bytes), cl->buffers, cl->launches,
			    cl->inflight, cl->recording ? "+" : " ",
			    fmt_ms(idle, sizeof(idle), cl->idle_ms));
	}
	if (!now->nclients)
		screen_line(scr, "(no clients connected)");
	if (scr->tty)
		fputs("\033[J", scr->f);
	else
		fputs("\n", scr->f);
	free(rows);
	free(share);
}

static void window_size(struct screen *scr)
{
	struct winsize ws;
	scr->rows = 24;
	scr->cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		scr->rows = ws.ws_row;
		scr->cols = ws.ws_col;
	}
}

int ctl_top(struct ctl *c, const struct top_options *o)
{
	bool raw = isatty(STDIN_FILENO), tty = isatty(STDOUT_FILENO), stdin_open = true;
	struct termios saved;
	if (raw && tcgetattr(STDIN_FILENO, &saved) == 0) {
		struct termios t = saved;
		t.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &t);
	} else {
		raw = false;
	}
	struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term, old_hup, old_winch;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, &old_winch);
	if (tty)
		fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);

	struct snapshot before, now;
	int rc = snapshot_take(c, &before, SNAP_CLIENTS);
	/* a first short sample so the first frame already shows the load */
	int quit = rc ? 1 : wait_keys(o->interval < 0.2 ? o->interval : 0.2, &stdin_open);
	long frames = 0;
	while (!quit) {
		rc = snapshot_take(c, &now, SNAP_CLIENTS);
		if (rc) {
			snapshot_free(&now);
			break;
		}
		struct screen scr = {.tty = tty};
		window_size(&scr);
		scr.f = open_memstream(&scr.buf, &scr.len);
		if (!scr.f) {
			snapshot_free(&now);
			rc = CTL_EXIT_DAEMON;
			break;
		}
		render(&scr, c, &before, &now, o->interval);
		fclose(scr.f);
		fwrite(scr.buf, 1, scr.len, stdout);
		fflush(stdout);
		free(scr.buf);
		snapshot_free(&before);
		before = now;
		if (o->iterations && ++frames >= o->iterations)
			break;
		quit = wait_keys(o->interval, &stdin_open);
	}
	snapshot_free(&before);

	if (tty)
		fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	sigaction(SIGWINCH, &old_winch, NULL);
	if (rc && tty) /* what went wrong was printed on the alternate screen */
		fprintf(stderr, "rudactl: top: stopped: rudad went away or refused a request\n");
	return rc;
}
