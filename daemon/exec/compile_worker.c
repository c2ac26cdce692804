#include "exec/compile_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "device/device.h"
#include "common/log.h"
#include "exec/compile_wire.h"

/* How often a busy worker's deadline and memory are checked. */
#define SAMPLE_MS 20u
/* A worker that has not opened its device after this long is given up. */
#define STARTUP_MS 60000u

static struct ruda_compile_settings settings;

void ruda__compile_worker_configure(const struct ruda_compile_settings *s)
{
	settings = *s;
}

void ruda__compile_worker_enable(uint32_t timeout_ms, uint64_t memory_max)
{
	/* the path now, not /proc/self/exe at each start: valgrind resolves
	 * readlink to the program it runs, not to itself */
	/* tests point it elsewhere to see rudad without a worker */
	const char *test_exe = getenv("RUDA_TEST_COMPILE_WORKER");
	ssize_t n = test_exe ? (ssize_t)snprintf(settings.exe, sizeof(settings.exe), "%s", test_exe)
			     : readlink("/proc/self/exe", settings.exe, sizeof(settings.exe) - 1);
	if (n <= 0 || (size_t)n >= sizeof(settings.exe)) {
		log_warn("compile worker: cannot find rudad's own executable (%s); kernels "
			 "compile in-process, without compile_timeout_ms or compile_memory_max",
			 strerror(errno));
		return;
	}
	settings.exe[n] = '\0';
	settings.enabled = true;
	ruda__compile_worker_set_bounds(timeout_ms, memory_max);
}

void ruda__compile_worker_set_bounds(uint32_t timeout_ms, uint64_t memory_max)
{
	settings.timeout_ms = timeout_ms;
	settings.memory_max = memory_max;
}

/* ---- the daemon's side ------------------------------------------------------ */

struct ruda_compile_worker {
	struct ruda_compile_pool *pool; /* NULL once abandoned */
	uv_process_t process;
	uv_poll_t poll; /* the socket: uv_poll, as rudad's clients (no uv_stream) */
	int fd;
	uv_timer_t timer;
	int open_handles;
	bool ready, exited, killed;
	struct ruda_compile_job *job; /* in the worker now */
	uint8_t *out;                 /* the message being written */
	size_t out_size, out_sent;
	struct wire_reply reply;
	size_t got;
	uint64_t started_ns;
};

static void worker_handle_closed(uv_handle_t *handle)
{
	struct ruda_compile_worker *w = handle->data;
	if (handle == (uv_handle_t *)&w->poll)
		close(w->fd);
	if (--w->open_handles == 0) {
		free(w->out);
		free(w);
	}
}

static void record_verdict(struct ruda_compile_pool *pool, const uint8_t digest[RUDA_SHA256_SIZE],
			   ruda_status status, const char *message)
{
	uint32_t i = pool->next_verdict;
	pool->next_verdict = (i + 1) % RUDA_COMPILE_VERDICTS;
	if (pool->nverdicts < RUDA_COMPILE_VERDICTS)
		pool->nverdicts++;
	memcpy(pool->verdicts[i], digest, RUDA_SHA256_SIZE);
	pool->verdict_status[i] = status;
	snprintf(pool->verdict_message[i], sizeof(pool->verdict_message[i]), "%s", message);
}

ruda_status ruda__compile_pool_verdict(const struct ruda_compile_pool *pool,
				       const uint8_t digest[RUDA_SHA256_SIZE], char *message,
				       size_t len)
{
	for (uint32_t i = 0; i < pool->nverdicts; i++)
		if (memcmp(pool->verdicts[i], digest, RUDA_SHA256_SIZE) == 0) {
			snprintf(message, len, "%s (refused earlier; not compiled again)",
				 pool->verdict_message[i]);
			return pool->verdict_status[i];
		}
	return RUDA_OK;
}

void ruda__compile_request_digest(const struct ruda_compile_request *req,
				  uint8_t out[RUDA_SHA256_SIZE])
{
	const struct ruda_pipeline_source *k = &req->kernel;
	struct ruda_sha256 h;
	uint32_t fields[3] = {k->binding_count, k->push_constant_size, k->nspec};
	ruda__sha256_init(&h);
	ruda__sha256_update(&h, fields, sizeof(fields));
	ruda__sha256_update(&h, k->entry_point, strlen(k->entry_point) + 1);
	for (uint32_t i = 0; i < k->nspec; i++) {
		uint32_t id_size[2] = {k->spec[i].id, k->spec[i].size};
		ruda__sha256_update(&h, id_size, sizeof(id_size));
		ruda__sha256_update(&h, &k->spec[i].value, k->spec[i].size);
	}
	ruda__sha256_update(&h, k->spirv, k->spirv_size);
	ruda__sha256_final(&h, out);
}

static void pump(struct ruda_compile_pool *pool);

static void finish_job(struct ruda_compile_job *job, enum ruda_compile_result result,
		       ruda_status status, const char *message)
{
	free(job->message);
	job->message = NULL;
	job->done(job, result, status, message);
}

/* The queued jobs compile in-process: the worker cannot start. */
static void give_up(struct ruda_compile_pool *pool, const char *why)
{
	if (!pool->broken)
		log_error("compile worker for physical device %u: %s; kernels compile in-process, "
			  "without compile_timeout_ms or compile_memory_max",
			  pool->physical_index, why);
	pool->broken = true;
	while (pool->queue) {
		struct ruda_compile_job *job = pool->queue;
		pool->queue = job->next;
		finish_job(job, RUDA_COMPILE_UNAVAILABLE, RUDA_OK, NULL);
	}
}

/* Take `w` away from its pool: its process is killed (if not gone) and
 * reaped, its handles closed, then it frees itself. */
static void abandon(struct ruda_compile_worker *w)
{
	struct ruda_compile_pool *pool = w->pool;
	if (pool && pool->worker == w)
		pool->worker = NULL;
	w->pool = NULL;
	if (!w->exited && !w->killed) {
		uv_process_kill(&w->process, SIGKILL);
		w->killed = true;
	}
	/* the loop waits for the child's exit (bounded: SIGKILL), so it is
	 * reaped even at shutdown */
	if (!w->exited)
		uv_ref((uv_handle_t *)&w->process);
	uv_close((uv_handle_t *)&w->poll, worker_handle_closed);
	uv_close((uv_handle_t *)&w->timer, worker_handle_closed);
	if (w->exited)
		uv_close((uv_handle_t *)&w->process, worker_handle_closed);
}

/* The job in the worker went past a bound, or the worker died with it. */
static void refuse_job(struct ruda_compile_worker *w, const char *message)
{
	struct ruda_compile_pool *pool = w->pool;
	struct ruda_compile_job *job = w->job;
	w->job = NULL;
	log_warn("compile worker for physical device %u: %s; the kernel is refused",
		 pool->physical_index, message);
	record_verdict(pool, job->digest, RUDA_ERROR_INVALID_KERNEL, message);
	pool->killed++;
	abandon(w);
	finish_job(job, RUDA_COMPILE_REFUSED, RUDA_ERROR_INVALID_KERNEL, message);
	pump(pool);
}

static uint64_t process_rss(int pid)
{
	char path[64], text[128];
	snprintf(path, sizeof(path), "/proc/%d/statm", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	unsigned long long size, resident;
	if (sscanf(text, "%llu %llu", &size, &resident) != 2)
		return 0;
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void format_size(char *buf, size_t len, uint64_t bytes)
{
	if (bytes % (1ull << 30) == 0)
		snprintf(buf, len, "%lluG", (unsigned long long)(bytes >> 30));
	else if (bytes % (1ull << 20) == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(bytes >> 20));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
}

static void on_timer(uv_timer_t *timer)
{
	struct ruda_compile_worker *w = timer->data;
	struct ruda_compile_pool *pool = w->pool;
	if (!pool)
		return;
	uint64_t now = uv_hrtime();
	if (!w->ready) {
		if (now - w->started_ns > (uint64_t)STARTUP_MS * 1000000u) {
			abandon(w);
			give_up(pool, "it did not open the device within a minute");
		}
		return;
	}
	struct ruda_compile_job *job = w->job;
	if (!job) {
		uv_timer_stop(timer);
		return;
	}
	char message[160];
	uint64_t rss = settings.memory_max ? process_rss(w->process.pid) : 0;
	if (settings.timeout_ms && now - job->start_ns > (uint64_t)settings.timeout_ms * 1000000u) {
		snprintf(message, sizeof(message),
			 "compiling the kernel took longer than compile_timeout_ms (%u ms)",
			 settings.timeout_ms);
		refuse_job(w, message);
	} else if (settings.memory_max && rss > settings.memory_max) {
		char cap[32];
		format_size(cap, sizeof(cap), settings.memory_max);
		snprintf(message, sizeof(message),
			 "compiling the kernel used more than compile_memory_max (%s): %llu MiB",
			 cap, (unsigned long long)(rss >> 20));
		refuse_job(w, message);
	}
}

static void worker_exited(uv_process_t *process, int64_t status, int signal)
{
	struct ruda_compile_worker *w = process->data;
	w->exited = true;
	struct ruda_compile_pool *pool = w->pool;
	if (!pool) { /* abandoned: only the reaping was left */
		uv_close((uv_handle_t *)process, worker_handle_closed);
		return;
	}
	char message[160];
	if (signal)
		snprintf(message, sizeof(message), "the compiler died (signal %d: %s)", signal,
			 strsignal(signal));
	else
		snprintf(message, sizeof(message), "the compiler exited (status %lld)",
			 (long long)status);
	if (w->job) {
		refuse_job(w, message); /* abandons w */
	} else {
		bool started = w->ready;
		abandon(w);
		if (!started)
			give_up(pool, message);
		else
			pump(pool);
	}
}

static void got_reply(struct ruda_compile_worker *w)
{
	struct ruda_compile_pool *pool = w->pool;
	if (w->reply.magic == RUDA_COMPILE_MAGIC_READY && !w->ready) {
		w->ready = true;
		log_info("compile worker for physical device %u: pid %d ready",
			 pool->physical_index, w->process.pid);
		pump(pool);
		return;
	}
	struct ruda_compile_job *job = w->job;
	if (w->reply.magic != RUDA_COMPILE_MAGIC_REPLY || !job) {
		w->job = NULL;
		abandon(w);
		if (job)
			finish_job(job, RUDA_COMPILE_UNAVAILABLE, RUDA_OK, NULL);
		log_error("compile worker for physical device %u: a garbled answer; restarting it",
			  pool->physical_index);
		pump(pool);
		return;
	}
	w->job = NULL;
	if (w->reply.result != VK_SUCCESS)
		log_debug("compile worker: the driver refused a kernel (VkResult %d)",
			  w->reply.result);
	finish_job(job, RUDA_COMPILE_PASSED, RUDA_OK, NULL);
	pump(pool);
}

static void on_poll(uv_poll_t *poll, int status, int events)
{
	struct ruda_compile_worker *w = poll->data;
	if (status < 0 || !w->pool) { /* its exit says what happened */
		uv_poll_stop(poll);
		return;
	}
	if ((events & UV_WRITABLE) && w->out) {
		ssize_t n = send(w->fd, w->out + w->out_sent, w->out_size - w->out_sent,
				 MSG_NOSIGNAL);
		if (n > 0)
			w->out_sent += (size_t)n;
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			uv_poll_stop(poll); /* it died: its exit follows */
			return;
		}
		if (w->out_sent == w->out_size) {
			free(w->out);
			w->out = NULL;
			uv_poll_start(poll, UV_READABLE, on_poll);
		}
	}
	if (!(events & UV_READABLE))
		return;
	/* no more than one reply: the worker answers one request at a time */
	ssize_t n = recv(w->fd, (uint8_t *)&w->reply + w->got, sizeof(w->reply) - w->got, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		uv_poll_stop(poll);
		return;
	}
	if (n < 0)
		return;
	w->got += (size_t)n;
	if (w->got == sizeof(w->reply)) {
		w->got = 0;
		got_reply(w);
	}
}

/* The environment, less what would make the worker count as rudad. */
static char **worker_environment(void)
{
	extern char **environ;
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 1, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		/* tests/vkcount counts the Vulkan objects of rudad's process */
		if (strncmp(environ[i], "RUDA_VK_COUNT_FILE=", 19) != 0)
			env[k++] = environ[i];
	return env;
}

static int spawn(struct ruda_compile_pool *pool)
{
	struct ruda_compile_worker *w = calloc(1, sizeof(*w));
	char **env = worker_environment();
	int sv[2] = {-1, -1};
	if (!w || !env || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		int err = -errno;
		free(w);
		free(env);
		return err ? err : -ENOMEM;
	}
	char physical[16], uuid[2 * VK_UUID_SIZE + 1];
	snprintf(physical, sizeof(physical), "%u", pool->physical_index);
	for (unsigned i = 0; i < VK_UUID_SIZE; i++)
		snprintf(uuid + 2 * i, 3, "%02x", pool->device_uuid[i]);
	char *args[] = {(char *)"rudad", (char *)RUDA_COMPILE_WORKER_ARG, physical, uuid, NULL};
	uv_stdio_container_t stdio[4] = {
		/* rudad's own: UV_IGNORE would keep a /dev/null open in rudad */
		{.flags = UV_INHERIT_FD, .data.fd = STDIN_FILENO},
		{.flags = UV_INHERIT_FD, .data.fd = STDOUT_FILENO},
		{.flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO}, /* its log lines */
		{.flags = UV_INHERIT_FD, .data.fd = sv[1]},
	};
	uv_process_options_t options = {
		.exit_cb = worker_exited,
		.file = settings.exe,
		.args = args,
		.env = env,
		.stdio_count = 4,
		.stdio = stdio,
	};
	w->process.data = w;
	int err = uv_spawn(pool->loop, &w->process, &options);
	free(env);
	close(sv[1]);
	if (err < 0) {
		close(sv[0]);
		/* a process handle that failed to spawn must still be closed */
		w->open_handles = 1;
		uv_close((uv_handle_t *)&w->process, worker_handle_closed);
		return err;
	}
	w->open_handles = 3;
	w->pool = pool;
	w->started_ns = uv_hrtime();
	w->fd = sv[0];
	uv_timer_init(pool->loop, &w->timer);
	w->timer.data = w;
	uv_unref((uv_handle_t *)&w->process);
	pool->worker = w;
	if (uv_poll_init(pool->loop, &w->poll, w->fd) < 0) {
		/* nothing polls: the process and timer go, the socket here */
		close(w->fd);
		w->open_handles = 2;
		w->pool = NULL;
		pool->worker = NULL;
		uv_process_kill(&w->process, SIGKILL);
		w->killed = true;
		uv_ref((uv_handle_t *)&w->process);
		uv_close((uv_handle_t *)&w->timer, worker_handle_closed);
		return -EIO;
	}
	w->poll.data = w;
	uv_unref((uv_handle_t *)&w->poll);
	uv_poll_start(&w->poll, UV_READABLE, on_poll);
	return 0;
}

static void spawn_failed(struct ruda_compile_pool *pool, int err)
{
	char why[sizeof(settings.exe) + 64];
	snprintf(why, sizeof(why), "cannot start %s: %s", settings.exe, uv_strerror(err));
	give_up(pool, why);
}

/* The next job: the oldest whose owner was not served last, so that one
 * client's kernels take turns with everyone else's. */
static struct ruda_compile_job *take_next(struct ruda_compile_pool *pool)
{
	struct ruda_compile_job **link = &pool->queue;
	for (struct ruda_compile_job **l = &pool->queue; *l; l = &(*l)->next)
		if ((*l)->owner != pool->last_owner) {
			link = l;
			break;
		}
	struct ruda_compile_job *job = *link;
	*link = job->next;
	job->next = NULL;
	pool->last_owner = job->owner;
	return job;
}

static void pump(struct ruda_compile_pool *pool)
{
	if (!pool->queue || pool->broken)
		return;
	if (!pool->worker) {
		int err = spawn(pool);
		if (err < 0) {
			spawn_failed(pool, err);
			return;
		}
	}
	struct ruda_compile_worker *w = pool->worker;
	/* the timer keeps the loop running while jobs wait: a stop waits for
	 * them, at most compile_timeout_ms each */
	if (!uv_is_active((uv_handle_t *)&w->timer))
		uv_timer_start(&w->timer, on_timer, SAMPLE_MS, SAMPLE_MS);
	if (!w->ready || w->job || w->out)
		return;
	struct ruda_compile_job *job = take_next(pool);
	w->job = job;
	w->out = job->message; /* the worker's until written */
	job->message = NULL;
	job->start_ns = uv_hrtime();
	w->out_size = job->message_size;
	w->out_sent = 0;
	uv_poll_start(&w->poll, UV_READABLE | UV_WRITABLE, on_poll);
}

void ruda__compile_pool_init(struct ruda_compile_pool *pool, uv_loop_t *loop,
			     uint32_t physical_index, const uint8_t device_uuid[VK_UUID_SIZE])
{
	memset(pool, 0, sizeof(*pool));
	pool->loop = loop;
	pool->physical_index = physical_index;
	memcpy(pool->device_uuid, device_uuid, VK_UUID_SIZE);
}

void ruda__compile_pool_finish(struct ruda_compile_pool *pool)
{
	if (pool->worker) {
		struct ruda_compile_job *job = pool->worker->job;
		pool->worker->job = NULL;
		abandon(pool->worker);
		if (job)
			finish_job(job, RUDA_COMPILE_UNAVAILABLE, RUDA_OK, NULL);
	}
	while (pool->queue) {
		struct ruda_compile_job *job = pool->queue;
		pool->queue = job->next;
		finish_job(job, RUDA_COMPILE_UNAVAILABLE, RUDA_OK, NULL);
	}
	pool->broken = true;
}

int ruda__compile_pool_submit(struct ruda_compile_pool *pool, struct ruda_compile_job *job,
			      const struct ruda_compile_request *req, ruda_compile_done_fn *done,
			      void *data)
{
	const struct ruda_pipeline_source *k = &req->kernel;
	if (!settings.enabled || pool->broken || !pool->loop)
		return -ENODEV;
	size_t entry_size = strlen(k->entry_point) + 1;
	size_t size = sizeof(struct wire_request) + k->spirv_size + entry_size +
		      k->nspec * sizeof(*k->spec);
	uint8_t *m = malloc(size);
	if (!m)
		return -ENOMEM;
	struct wire_request h = {
		.magic = RUDA_COMPILE_MAGIC_REQUEST,
		.spirv_size = (uint32_t)k->spirv_size,
		.entry_size = (uint32_t)entry_size,
		.binding_count = k->binding_count,
		.push_constant_size = k->push_constant_size,
		.nspec = k->nspec,
	};
	uint8_t *p = m;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, k->spirv, k->spirv_size);
	p += k->spirv_size;
	memcpy(p, k->entry_point, entry_size);
	p += entry_size;
	if (k->nspec)
		memcpy(p, k->spec, k->nspec * sizeof(*k->spec));
	job->next = NULL;
	job->owner = req->owner;
	job->done = done;
	job->data = data;
	job->message = m;
	job->message_size = size;
	struct ruda_compile_job **tail = &pool->queue;
	while (*tail)
		tail = &(*tail)->next;
	*tail = job;
	if (!pool->worker) {
		int err = spawn(pool);
		if (err < 0) {
			*tail = NULL;
			free(m);
			job->message = NULL;
			spawn_failed(pool, err);
			return -ENODEV;
		}
	}
	pump(pool);
	return 0;
}
