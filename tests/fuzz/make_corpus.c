/*
 * Writes the seed corpora of the fuzz targets:
 *
 *   make_corpus BUILD_DIR OUT_DIR
 *
 * OUT_DIR/dispatch/<name>: request frames as a client sends them after its
 * Hello (fuzz_dispatch does the Hello itself and puts BUILD_DIR's
 * shaders/fill.spv at arena offset 4096): valid requests of every type,
 * alone and in the sequences that make them do real work, and a few
 * refused ones. OUT_DIR/frame/<name>: the same streams behind fuzz_frame's
 * split byte (each in two split modes), with a Hello in front.
 * OUT_DIR/admin/<name>: single ruda.Admin messages (fuzz_admin's input):
 * every command, with edge values, none, an unknown and a truncated body.
 *
 * Built and run by hand (the corpora are committed):
 *   cc -std=c11 -Ibuild/gen tests/fuzz/make_corpus.c build/gen/ruda.pb-c.c \
 *      build/gen/admin.pb-c.c proto/frame.c proto/sha256.c -lprotobuf-c -o /tmp/mc
 *   /tmp/mc build tests/fuzz/corpus
 */
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../proto/frame.h"
#include "../../proto/sha256.h"
#include "ruda.pb-c.h"

#define PROTOCOL_VERSION 1u
#define DATA 4096u /* RUDA_ARENA_DATA_OFFSET: where fuzz_dispatch puts fill.spv */

static uint8_t stream[1 << 20];
static size_t stream_len;
static uint64_t next_id;
static size_t spirv_size;
static uint8_t spirv_sha[RUDA_SHA256_SIZE];
static const char *out_dir;

static void frame_raw(const void *payload, uint32_t len, uint16_t nfds)
{
	ruda__frame_header_encode(stream + stream_len, len, nfds);
	memcpy(stream + stream_len + RUDA_FRAME_HEADER_SIZE, payload, len);
	stream_len += RUDA_FRAME_HEADER_SIZE + len;
}

static void frame(Ruda__Request *req)
{
	req->id = ++next_id;
	uint8_t buf[RUDA_FRAME_MAX_PAYLOAD];
	size_t n = ruda__request__pack(req, buf);
	frame_raw(buf, (uint32_t)n, 0);
}

#define REQ(field, CASE, value)                                       \
	do {                                                          \
		Ruda__Request r_ = RUDA__REQUEST__INIT;               \
		r_.body_case = RUDA__REQUEST__BODY_##CASE;            \
		r_.field = (value);                                   \
		frame(&r_);                                           \
	} while (0)

static void empty(uint64_t handle, uint64_t size)
{
	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.handle = handle;
	e.size = size;
	REQ(empty, EMPTY, &e);
}

static void try_empty(uint64_t handle, uint64_t size)
{
	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.handle = handle;
	e.size = size;
	e.reply = 1;
	REQ(empty, EMPTY, &e);
}

static void write_(uint64_t handle, uint64_t offset, uint64_t arena_offset, uint64_t size)
{
	Ruda__Write w = RUDA__WRITE__INIT;
	w.handle = handle;
	w.offset = offset;
	w.arena_offset = arena_offset;
	w.size = size;
	REQ(write, WRITE, &w);
}

static void read_(uint64_t handle, uint64_t offset, uint64_t arena_offset, uint64_t size)
{
	Ruda__Read r = RUDA__READ__INIT;
	r.handle = handle;
	r.offset = offset;
	r.arena_offset = arena_offset;
	r.size = size;
	REQ(read, READ, &r);
}

/* Write (or Read, `down`) naming staging region `region`. */
static void staging_copy(int down, uint64_t handle, uint64_t region, uint64_t at, uint64_t size)
{
	Ruda__Write w = RUDA__WRITE__INIT;
	Ruda__Read r = RUDA__READ__INIT;
	w.handle = r.handle = handle;
	w.region = r.region = region;
	w.arena_offset = r.arena_offset = at;
	w.size = r.size = size;
	if (down)
		REQ(read, READ, &r);
	else
		REQ(write, WRITE, &w);
}

/* StagingAttach (its fd cannot come with a corpus file: refused) and
 * StagingDetach. */
static void staging(int attach, uint64_t region, uint64_t size)
{
	Ruda__StagingAttach a = RUDA__STAGING_ATTACH__INIT;
	Ruda__StagingDetach d = RUDA__STAGING_DETACH__INIT;
	a.region = d.region = region;
	a.size = size;
	if (attach)
		REQ(staging_attach, STAGING_ATTACH, &a);
	else
		REQ(staging_detach, STAGING_DETACH, &d);
}

static void allocation_mode(int mode)
{
	Ruda__AllocationMode m = RUDA__ALLOCATION_MODE__INIT;
	m.mode = (Ruda__AllocationModeKind)mode;
	REQ(allocation_mode, ALLOCATION_MODE, &m);
}

static void export_resource(uint64_t handle)
{
	Ruda__ExportResource e = RUDA__EXPORT_RESOURCE__INIT;
	e.handle = handle;
	REQ(export_resource, EXPORT_RESOURCE, &e);
}

static void release(const uint64_t *handles, size_t n)
{
	Ruda__Release r = RUDA__RELEASE__INIT;
	r.handles = (uint64_t *)handles;
	r.n_handles = n;
	REQ(release, RELEASE, &r);
}

static void kernel_register(uint64_t kernel, int by_hash, uint32_t spec)
{
	Ruda__KernelRegister k = RUDA__KERNEL_REGISTER__INIT;
	k.kernel = kernel;
	k.arena_offset = by_hash ? 0 : DATA;
	k.size = by_hash ? 0 : spirv_size;
	k.entry_point = "main";
	k.binding_count = 1;
	k.push_constant_size = 8;
	k.module_hash.data = spirv_sha;
	k.module_hash.len = sizeof(spirv_sha);
	Ruda__SpecConstant c = RUDA__SPEC_CONSTANT__INIT;
	Ruda__SpecConstant *cs[1] = {&c};
	uint32_t value = 7;
	if (spec) {
		c.id = spec;
		c.value.data = (uint8_t *)&value;
		c.value.len = 4;
		k.specialization = cs;
		k.n_specialization = 1;
	}
	REQ(kernel_register, KERNEL_REGISTER, &k);
}

static void kernel_lookup(void)
{
	Ruda__KernelLookup k = RUDA__KERNEL_LOOKUP__INIT;
	k.module_hash.data = spirv_sha;
	k.module_hash.len = sizeof(spirv_sha);
	REQ(kernel_lookup, KERNEL_LOOKUP, &k);
}

static void kernel_release(uint64_t kernel)
{
	Ruda__KernelRelease k = RUDA__KERNEL_RELEASE__INIT;
	k.kernel = kernel;
	REQ(kernel_release, KERNEL_RELEASE, &k);
}

static void launch(uint64_t kernel, uint32_t groups, uint64_t handle, uint64_t offset,
		   uint64_t size, uint32_t value, uint32_t count)
{
	Ruda__Launch l = RUDA__LAUNCH__INIT;
	l.kernel = kernel;
	l.count_x = groups;
	l.count_y = 1;
	l.count_z = 1;
	Ruda__Binding b = RUDA__BINDING__INIT;
	b.handle = handle;
	b.offset = offset;
	b.size = size;
	Ruda__Binding *bs[1] = {&b};
	l.bindings = bs;
	l.n_bindings = 1;
	uint32_t push[2] = {value, count};
	l.push_constants.data = (uint8_t *)push;
	l.push_constants.len = sizeof(push);
	REQ(launch, LAUNCH, &l);
}

/* A launch of kernel 1 over buffer 1 with counts at `offset` of `counts`. */
static void launch_dynamic(uint64_t counts, uint64_t offset)
{
	Ruda__Launch l = RUDA__LAUNCH__INIT;
	l.kernel = 1;
	Ruda__Binding b = RUDA__BINDING__INIT;
	b.handle = 1;
	Ruda__Binding *bs[1] = {&b};
	l.bindings = bs;
	l.n_bindings = 1;
	Ruda__DynamicCount dc = RUDA__DYNAMIC_COUNT__INIT;
	dc.handle = counts;
	dc.offset = offset;
	l.dynamic_count = &dc;
	uint32_t push[2] = {3, 64};
	l.push_constants.data = (uint8_t *)push;
	l.push_constants.len = sizeof(push);
	REQ(launch, LAUNCH, &l);
}

/* A launch of kernel 1 over buffer 1 with counts x, y, z. */
static void launch_xyz(uint32_t x, uint32_t y, uint32_t z)
{
	Ruda__Launch l = RUDA__LAUNCH__INIT;
	l.kernel = 1;
	l.count_x = x;
	l.count_y = y;
	l.count_z = z;
	Ruda__Binding b = RUDA__BINDING__INIT;
	b.handle = 1;
	Ruda__Binding *bs[1] = {&b};
	l.bindings = bs;
	l.n_bindings = 1;
	uint32_t push[2] = {1, 64};
	l.push_constants.data = (uint8_t *)push;
	l.push_constants.len = sizeof(push);
	REQ(launch, LAUNCH, &l);
}

/* KernelRegister of `size` bytes of the arena at DATA (fill.spv's and
 * whatever follows), with spec constant `spec` = `value` when spec > 0. */
static void kernel_register_sized(uint64_t kernel, uint64_t size, uint32_t spec, uint32_t value)
{
	Ruda__KernelRegister k = RUDA__KERNEL_REGISTER__INIT;
	k.kernel = kernel;
	k.arena_offset = DATA;
	k.size = size;
	k.entry_point = "main";
	k.binding_count = 1;
	k.push_constant_size = 8;
	Ruda__SpecConstant c = RUDA__SPEC_CONSTANT__INIT;
	Ruda__SpecConstant *cs[1] = {&c};
	if (spec) {
		c.id = spec;
		c.value.data = (uint8_t *)&value;
		c.value.len = 4;
		k.specialization = cs;
		k.n_specialization = 1;
	}
	REQ(kernel_register, KERNEL_REGISTER, &k);
}

static void throughput_set(const char *key, double value)
{
	Ruda__ThroughputSet t = RUDA__THROUGHPUT_SET__INIT;
	t.key = (char *)key;
	t.value = value;
	REQ(throughput_set, THROUGHPUT_SET, &t);
}

static void throughput_get(const char *key)
{
	Ruda__ThroughputGet t = RUDA__THROUGHPUT_GET__INIT;
	t.key = (char *)key;
	REQ(throughput_get, THROUGHPUT_GET, &t);
}

static void handles_req(Ruda__Request__BodyCase c, const uint64_t *handles, size_t n)
{
	Ruda__Request r = RUDA__REQUEST__INIT;
	r.body_case = c;
	Ruda__Check ch = RUDA__CHECK__INIT;
	Ruda__SyncBuffers sb = RUDA__SYNC_BUFFERS__INIT;
	if (c == RUDA__REQUEST__BODY_CHECK) {
		ch.handles = (uint64_t *)handles;
		ch.n_handles = n;
		r.check = &ch;
	} else {
		sb.handles = (uint64_t *)handles;
		sb.n_handles = n;
		r.sync_buffers = &sb;
	}
	frame(&r);
}

static void flush(void)
{
	Ruda__Flush f = RUDA__FLUSH__INIT;
	REQ(flush, FLUSH, &f);
}

static void sync_(void)
{
	Ruda__Sync s = RUDA__SYNC__INIT;
	REQ(sync, SYNC, &s);
}

static void fence(void)
{
	Ruda__Fence f = RUDA__FENCE__INIT;
	REQ(fence, FENCE, &f);
}

static void stats(void)
{
	Ruda__Stats s = RUDA__STATS__INIT;
	REQ(stats, STATS, &s);
}

static void profile(int what, uint64_t window)
{
	Ruda__ProfileStart ps = RUDA__PROFILE_START__INIT;
	Ruda__ProfileEnd pe = RUDA__PROFILE_END__INIT;
	Ruda__ProfileAbandon pa = RUDA__PROFILE_ABANDON__INIT;
	ps.window = pe.window = pa.window = window;
	if (what == 0)
		REQ(profile_start, PROFILE_START, &ps);
	else if (what == 1)
		REQ(profile_end, PROFILE_END, &pe);
	else
		REQ(profile_abandon, PROFILE_ABANDON, &pa);
}

static void exclusive(int begin, uint32_t timeout_ms)
{
	Ruda__ExclusiveBegin b = RUDA__EXCLUSIVE_BEGIN__INIT;
	Ruda__ExclusiveEnd e = RUDA__EXCLUSIVE_END__INIT;
	b.timeout_ms = timeout_ms;
	if (begin)
		REQ(exclusive_begin, EXCLUSIVE_BEGIN, &b);
	else
		REQ(exclusive_end, EXCLUSIVE_END, &e);
}

static void memory(int what)
{
	Ruda__MemoryUsage u = RUDA__MEMORY_USAGE__INIT;
	Ruda__MemoryCleanup c = RUDA__MEMORY_CLEANUP__INIT;
	Ruda__MemoryCompact k = RUDA__MEMORY_COMPACT__INIT;
	if (what == 0)
		REQ(memory_usage, MEMORY_USAGE, &u);
	else if (what == 1)
		REQ(memory_cleanup, MEMORY_CLEANUP, &c);
	else
		REQ(memory_compact, MEMORY_COMPACT, &k);
}

static void admin(Ruda__Admin__BodyCase c)
{
	Ruda__Admin a = RUDA__ADMIN__INIT;
	Ruda__AdminStatus st = RUDA__ADMIN_STATUS__INIT;
	Ruda__AdminDevices dv = RUDA__ADMIN_DEVICES__INIT;
	Ruda__AdminClients cl = RUDA__ADMIN_CLIENTS__INIT;
	Ruda__AdminMemory me = RUDA__ADMIN_MEMORY__INIT;
	Ruda__AdminCache ca = RUDA__ADMIN_CACHE__INIT;
	Ruda__AdminKill ki = RUDA__ADMIN_KILL__INIT;
	Ruda__AdminCleanup cu = RUDA__ADMIN_CLEANUP__INIT;
	Ruda__AdminDrain dr = RUDA__ADMIN_DRAIN__INIT;
	Ruda__AdminShutdown sh = RUDA__ADMIN_SHUTDOWN__INIT;
	Ruda__AdminInjectDeviceLoss il = RUDA__ADMIN_INJECT_DEVICE_LOSS__INIT;
	a.body_case = c;
	switch (c) {
	case RUDA__ADMIN__BODY_STATUS: a.status = &st; break;
	case RUDA__ADMIN__BODY_DEVICES: a.devices = &dv; break;
	case RUDA__ADMIN__BODY_CLIENTS: a.clients = &cl; break;
	case RUDA__ADMIN__BODY_MEMORY: a.memory = &me; break;
	case RUDA__ADMIN__BODY_CACHE: ca.max_pipelines = 4; a.cache = &ca; break;
	case RUDA__ADMIN__BODY_KILL: ki.client = 999999; a.kill = &ki; break;
	case RUDA__ADMIN__BODY_CLEANUP: a.cleanup = &cu; break;
	case RUDA__ADMIN__BODY_DRAIN: a.drain = &dr; break;
	case RUDA__ADMIN__BODY_SHUTDOWN: a.shutdown = &sh; break;
	case RUDA__ADMIN__BODY_INJECT_DEVICE_LOSS: a.inject_device_loss = &il; break;
	default: break;
	}
	REQ(admin, ADMIN, &a);
}

static void save_file(const char *target, const char *name, const uint8_t *data, size_t len);

/* admin/<name>: one ruda.Admin message, fuzz_admin's input */
static void save_admin(const char *name, const Ruda__Admin *a)
{
	uint8_t buf[RUDA_FRAME_MAX_PAYLOAD];
	size_t n = ruda__admin__pack(a, buf);
	save_file("admin", name, buf, n);
}

static void admin_corpus(void)
{
	Ruda__Admin a = RUDA__ADMIN__INIT;
	save_admin("none", &a);
	Ruda__AdminStatus st = RUDA__ADMIN_STATUS__INIT;
	a.body_case = RUDA__ADMIN__BODY_STATUS; a.status = &st; save_admin("status", &a);
	Ruda__AdminDevices dv = RUDA__ADMIN_DEVICES__INIT;
	a.body_case = RUDA__ADMIN__BODY_DEVICES; a.devices = &dv; save_admin("devices", &a);
	Ruda__AdminClients cl = RUDA__ADMIN_CLIENTS__INIT;
	a.body_case = RUDA__ADMIN__BODY_CLIENTS; a.clients = &cl; save_admin("clients", &a);
	cl.after = UINT64_MAX; save_admin("clients_after_max", &a);
	Ruda__AdminMemory me = RUDA__ADMIN_MEMORY__INIT;
	a.body_case = RUDA__ADMIN__BODY_MEMORY; a.memory = &me; save_admin("memory", &a);
	Ruda__AdminCache ca = RUDA__ADMIN_CACHE__INIT;
	a.body_case = RUDA__ADMIN__BODY_CACHE; a.cache = &ca; save_admin("cache", &a);
	ca.max_pipelines = UINT32_MAX; save_admin("cache_max", &a);
	Ruda__AdminKill ki = RUDA__ADMIN_KILL__INIT;
	a.body_case = RUDA__ADMIN__BODY_KILL; a.kill = &ki; save_admin("kill_none", &a);
	ki.client = 1; save_admin("kill_1", &a);
	ki.client = UINT64_MAX; save_admin("kill_max", &a);
	Ruda__AdminCleanup cu = RUDA__ADMIN_CLEANUP__INIT;
	a.body_case = RUDA__ADMIN__BODY_CLEANUP; a.cleanup = &cu; save_admin("cleanup", &a);
	Ruda__AdminDrain dr = RUDA__ADMIN_DRAIN__INIT;
	a.body_case = RUDA__ADMIN__BODY_DRAIN; a.drain = &dr; save_admin("drain", &a);
	Ruda__AdminShutdown sh = RUDA__ADMIN_SHUTDOWN__INIT;
	a.body_case = RUDA__ADMIN__BODY_SHUTDOWN; a.shutdown = &sh; save_admin("shutdown", &a);
	Ruda__AdminInjectDeviceLoss il = RUDA__ADMIN_INJECT_DEVICE_LOSS__INIT;
	a.body_case = RUDA__ADMIN__BODY_INJECT_DEVICE_LOSS; a.inject_device_loss = &il;
	save_admin("inject_device_loss", &a);
	il.device = 7; save_admin("inject_device_loss_7", &a);
	/* a body field of a newer rudactl (99), and one cut short */
	static const uint8_t newer[] = {0x9a, 0x06, 0x00};
	save_file("admin", "unknown_body", newer, sizeof(newer));
	static const uint8_t cut[] = {0x1a, 0x05, 0x08};
	save_file("admin", "truncated", cut, sizeof(cut));
}

/* what: 0 prepare, 1 start, 2 stop, 3 abort, 4 replay, 5 release */
static void graph(int what, uint64_t id)
{
	Ruda__GraphPrepare p = RUDA__GRAPH_PREPARE__INIT;
	Ruda__GraphStartCapture b = RUDA__GRAPH_START_CAPTURE__INIT;
	Ruda__GraphStopCapture e = RUDA__GRAPH_STOP_CAPTURE__INIT;
	Ruda__GraphAbortCapture a = RUDA__GRAPH_ABORT_CAPTURE__INIT;
	Ruda__GraphReplay r = RUDA__GRAPH_REPLAY__INIT;
	Ruda__GraphRelease x = RUDA__GRAPH_RELEASE__INIT;
	e.graph = r.graph = x.graph = id;
	switch (what) {
	case 0: REQ(graph_prepare, GRAPH_PREPARE, &p); break;
	case 1: REQ(graph_start_capture, GRAPH_START_CAPTURE, &b); break;
	case 2: REQ(graph_stop_capture, GRAPH_STOP_CAPTURE, &e); break;
	case 3: REQ(graph_abort_capture, GRAPH_ABORT_CAPTURE, &a); break;
	case 4: REQ(graph_replay, GRAPH_REPLAY, &r); break;
	default: REQ(graph_release, GRAPH_RELEASE, &x); break;
	}
}

static void utilization(void)
{
	Ruda__Utilization u = RUDA__UTILIZATION__INIT;
	REQ(utilization, UTILIZATION, &u);
}

/* A copy into session `target` (the replay's own session is often 1). */
static void to_client(uint64_t handle, uint64_t size, uint64_t target, int tensor)
{
	Ruda__ToClient t = RUDA__TO_CLIENT__INIT;
	uint64_t shape[2] = {4, 8}, strides[2] = {1, 4};
	t.handle = handle;
	t.size = size;
	t.target_session = target;
	t.target_handle = 100;
	if (tensor) {
		t.n_shape = t.n_strides = 2;
		t.shape = shape;
		t.strides = strides;
		t.elem_size = 4;
	}
	REQ(to_client, TO_CLIENT, &t);
}

static void all_reduce(uint64_t src, uint64_t dst, uint64_t size, uint32_t type, uint32_t op)
{
	uint32_t devices[1] = {0};
	Ruda__CollectiveInit ci = RUDA__COLLECTIVE_INIT__INIT;
	ci.n_devices = 1;
	ci.devices = devices;
	REQ(collective_init, COLLECTIVE_INIT, &ci);
	Ruda__AllReduce a = RUDA__ALL_REDUCE__INIT;
	a.src = src;
	a.dst = dst;
	a.size = size;
	a.elem_type = type;
	a.op = (Ruda__ReduceOp)op;
	a.n_devices = 1;
	a.devices = devices;
	REQ(all_reduce, ALL_REDUCE, &a);
	Ruda__CollectiveSync cs = RUDA__COLLECTIVE_SYNC__INIT;
	REQ(collective_sync, COLLECTIVE_SYNC, &cs);
}

static void hello(void)
{
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = PROTOCOL_VERSION;
	h.client_name = "seed";
	REQ(hello, HELLO, &h);
}

static void save_file(const char *target, const char *name, const uint8_t *data, size_t len)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", out_dir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

/* The stream built since begin() goes to dispatch/<name>, and with a
 * Hello in front and a split byte to frame/<name>-whole and -bytes. */
static void begin(void)
{
	stream_len = 0;
	next_id = 1; /* the Hello fuzz_dispatch sends is request 1 */
}

static void save(const char *name)
{
	save_file("dispatch", name, stream, stream_len);
	static uint8_t framed[sizeof(stream) + 256];
	size_t body = stream_len;
	uint8_t copy[sizeof(stream)];
	memcpy(copy, stream, body);
	stream_len = 0;
	next_id = 0;
	hello();
	size_t hello_len = stream_len;
	for (int mode = 0; mode < 4; mode += 2) {
		framed[0] = (uint8_t)(mode == 0 ? 0x40 : 0x16); /* 0 mod 4: whole, 2: small */
		memcpy(framed + 1, stream, hello_len);
		memcpy(framed + 1 + hello_len, copy, body);
		char fname[256];
		snprintf(fname, sizeof(fname), "%s-%s", name, mode == 0 ? "whole" : "pieces");
		save_file("frame", fname, framed, 1 + hello_len + body);
	}
	stream_len = body;
	memcpy(stream, copy, body);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s BUILD_DIR OUT_DIR\n", argv[0]);
		return 2;
	}
	out_dir = argv[2];
	mkdir(out_dir, 0755);
	char path[1024];
	snprintf(path, sizeof(path), "%s/shaders/fill.spv", argv[1]);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return 1;
	}
	static uint8_t spirv[1 << 16];
	spirv_size = fread(spirv, 1, sizeof(spirv), f);
	fclose(f);
	ruda__sha256(spirv, spirv_size, spirv_sha);
	const uint64_t one = 1, two[2] = {1, 2}, none = 42;

	begin(); empty(1, 4096); save("empty");
	begin(); try_empty(1, 1000); try_empty(1, 16); save("try_empty");
	begin(); empty(1, 4096); write_(1, 0, DATA, 1024); sync_(); save("write");
	begin(); empty(1, 4096); write_(1, 100, DATA + 8, 1000); read_(1, 0, DATA + 8192, 4096);
	save("read");
	begin(); empty(1, 64); empty(2, 64); release(two, 2); save("release");
	begin(); kernel_register(1, 0, 0); save("kernel_register");
	begin(); kernel_register(1, 0, 0); kernel_register(2, 1, 0); save("kernel_register_hash");
	begin(); kernel_register(1, 0, 3); save("kernel_register_spec");
	begin(); kernel_register(1, 0, 0); kernel_lookup(); save("kernel_lookup");
	begin(); kernel_lookup(); save("kernel_lookup_unknown");
	begin(); kernel_register(1, 0, 0); kernel_release(1); save("kernel_release");
	begin(); empty(1, 4096); kernel_register(1, 0, 0); launch(1, 4, 1, 0, 0, 0xdeadbeef, 1024);
	read_(1, 0, DATA + 8192, 4096); sync_(); save("launch");
	begin(); empty(1, 65536); kernel_register(1, 0, 0);
	for (int i = 0; i < 8; i++)
		launch(1, 16, 1, (uint64_t)i * 256, 4096, (uint32_t)i, 1024);
	flush(); handles_req(RUDA__REQUEST__BODY_SYNC_BUFFERS, &one, 1);
	handles_req(RUDA__REQUEST__BODY_CHECK, &one, 1); save("launch_many");
	begin(); flush(); save("flush");
	begin(); sync_(); save("sync");
	begin(); empty(1, 16); handles_req(RUDA__REQUEST__BODY_CHECK, &one, 1); save("check");
	begin(); empty(1, 16); handles_req(RUDA__REQUEST__BODY_SYNC_BUFFERS, &one, 1);
	save("sync_buffers");
	begin(); empty(1, 4096); write_(1, 0, DATA, 4096); fence(); save("fence");
	begin(); stats(); save("stats");
	begin(); profile(0, 1); empty(1, 4096); kernel_register(1, 0, 0);
	launch(1, 1, 1, 0, 0, 1, 256); profile(1, 1); save("profile");
	begin(); profile(0, 5); profile(2, 5); save("profile_abandon");
	begin(); profile(1, 9); save("profile_end_unknown");
	begin(); exclusive(1, 1000); stats(); exclusive(0, 0); save("exclusive");
	begin(); exclusive(0, 0); save("exclusive_end_unheld");
	begin(); memory(0); save("memory_usage");
	begin(); empty(1, 1 << 20); release(&one, 1); memory(1); save("memory_cleanup");
	begin(); memory(2); save("memory_compact");
	begin(); empty(1, 4096); utilization(); save("utilization");
	begin(); empty(1, 4096); to_client(1, 4096, 1, 0); to_client(1, 0, 2, 1); sync_();
	save("to_client");
	begin(); empty(1, 4096); empty(2, 4096); all_reduce(1, 2, 4096, 0, 4); all_reduce(1, 2, 6, 3, 9);
	save("all_reduce");
	/* counts (2, 2, 2) written by fill: the arena's bytes are SPIR-V, whose
	 * words as counts would run for as long as the submission limit */
	begin(); empty(1, 4096); empty(2, 64); kernel_register(1, 0, 0); launch(1, 1, 2, 0, 0, 2, 3);
	launch_dynamic(2, 0); launch_dynamic(2, 4); launch_dynamic(2, 2); launch_dynamic(2, 60);
	launch_dynamic(9, 0); sync_(); save("launch_dynamic");
	begin(); empty(1, 4096); kernel_register(1, 0, 0); graph(0, 0); graph(1, 0);
	launch(1, 1, 1, 0, 0, 7, 1024); launch(1, 1, 1, 0, 0, 8, 1024); graph(2, 1);
	graph(4, 1); graph(4, 1); release(&one, 1); graph(4, 1); sync_(); graph(5, 1);
	save("graph");
	begin(); empty(1, 4096); kernel_register(1, 0, 0); graph(1, 0); launch(1, 1, 1, 0, 0, 7, 1024);
	read_(1, 0, DATA, 16); write_(1, 0, DATA, 16); sync_(); graph(3, 0); graph(2, 2);
	graph(4, 9); graph(5, 9); sync_(); save("graph_refused");
	for (int c = RUDA__ADMIN__BODY_STATUS; c <= RUDA__ADMIN__BODY_SHUTDOWN; c++) {
		static const char *names[] = {"", "status", "devices", "clients", "memory",
					      "cache", "kill", "cleanup", "drain", "shutdown"};
		char name[64];
		snprintf(name, sizeof(name), "admin_%s", names[c]);
		begin(); admin((Ruda__Admin__BodyCase)c); save(name);
	}
	begin(); admin(RUDA__ADMIN__BODY_INJECT_DEVICE_LOSS); save("admin_inject_device_loss");
	admin_corpus();
	/* refused */
	begin(); hello(); save("second_hello");
	begin(); write_(none, 0, DATA, 16); read_(none, 0, DATA, 16); sync_();
	save("bad_handle");
	begin(); empty(1, 16); write_(1, 8, DATA, 16); read_(1, 0, 0, 16);
	write_(1, 0, UINT64_MAX - 4, 16); sync_(); save("out_of_range");
	begin(); empty(1, UINT64_MAX); empty(2, 0); sync_(); save("bad_sizes");
	begin(); empty(1, 4096); kernel_register(1, 0, 0); launch(1, 1, 1, 3, 0, 0, 1);
	launch(1, 1, 1, 0, 8192, 0, 1); launch(7, 1, 1, 0, 0, 0, 1); sync_(); save("bad_launch");
	begin();
	{
		uint8_t garbage[] = {0x08, 0x01, 0x12, 0xff, 0xff, 0x03};
		frame_raw(garbage, sizeof(garbage), 0);
	}
	save("undecodable");
	begin();
	{
		Ruda__Request r = RUDA__REQUEST__INIT;
		frame(&r); /* no body: an unknown request type */
	}
	stats(); save("no_body");
	begin(); stats(); frame_raw("", 0, 1); save("fds_missing");
	begin(); staging(1, 1, 1 << 20); staging(0, 1, 0); save("staging_attach");
	begin(); empty(1, 4096); staging_copy(0, 1, 5, 0, 16); staging_copy(1, 1, 5, 0, 16);
	staging(0, 5, 0); sync_(); save("staging_unknown_region");
	begin(); allocation_mode(2); empty(1, 4096); allocation_mode(1); empty(2, 4096);
	allocation_mode(0); empty(3, 4096); export_resource(1); export_resource(3);
	export_resource(9); allocation_mode(7); sync_(); save("allocation_modes");
	/* the hostile-client classes (docs/reliability.md) */
	begin(); empty(1, 4096); kernel_register(1, 0, 0); launch_xyz(65535, 65535, 65535);
	launch_xyz(65535, 65535, 2); launch_xyz(65536, 65536, 1); launch_xyz(0, 65535, 65535);
	sync_(); save("launch_count_product");
	begin(); throughput_set("nan", NAN); throughput_set("ninf", -INFINITY);
	throughput_set("zero", 0.0); throughput_set("neg", -1.0); throughput_set("ok", 1.5e9);
	throughput_set("ok", 2.0); throughput_get("ok"); throughput_get("nan"); throughput_get("");
	save("throughput_values");
	begin();
	for (int i = 0; i < 300; i++) {
		char key[32];
		snprintf(key, sizeof(key), "k%d", i);
		throughput_set(key, 1.0 + i);
	}
	save("throughput_many");
	begin(); staging(1, 1, UINT64_MAX); staging(1, 2, UINT64_MAX - 4095); save("staging_huge");
	begin(); kernel_register_sized(1, 4u << 20, 0, 0); kernel_register_sized(2, 5, 0, 0);
	kernel_register_sized(3, (uint64_t)spirv_size, 1, 0x80000000u);
	kernel_register_sized(4, (uint64_t)spirv_size, 3, 4097); sync_(); save("kernel_limits");
	begin(); exclusive(1, 0); exclusive(1, 0); exclusive(0, 0); exclusive(1, 60000);
	exclusive(0, 0); exclusive(0, 0); save("exclusive_repeated");
	begin();
	for (uint64_t i = 1; i <= 2000; i++)
		empty(i, 16);
	save("teardown_many_buffers");
	begin(); empty(1, 1ull << 30); empty(2, (1ull << 30) + 1); sync_(); save("quota_edge");
	/* everything, in one session */
	begin();
	empty(1, 4096); try_empty(2, 4096); write_(1, 0, DATA, 512); read_(1, 0, DATA + 8192, 512);
	kernel_register(1, 0, 0); kernel_lookup(); kernel_register(2, 1, 0);
	launch(1, 2, 2, 0, 0, 5, 1024); flush(); handles_req(RUDA__REQUEST__BODY_CHECK, two, 2);
	handles_req(RUDA__REQUEST__BODY_SYNC_BUFFERS, two, 2); fence(); stats();
	profile(0, 1); profile(1, 1); exclusive(1, 100); exclusive(0, 0); memory(0); memory(1);
	memory(2); admin(RUDA__ADMIN__BODY_STATUS); kernel_release(2); release(two, 2); sync_();
	save("everything");
	return 0;
}
