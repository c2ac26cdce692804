/*
 * libruda: the client library of rudad, the ruda GPU compute daemon.
 *
 * A ruda_client is one connection to rudad and one session there: the
 * buffers, kernels and stream it creates belong to it and are released when
 * it closes (or its process dies). The calls mirror the Rust ErasedClient of
 * ruda-runtime; docs/api.md has the mapping table.
 *
 * Conventions:
 * - Every fallible call returns a ruda_status; RUDA_OK is 0.
 * - Calls that need no answer from the daemon (create, empty, launch,
 *   release, flush) are queued and sent in batches; errors they meet in the
 *   daemon are reported later by ruda_client_sync, ruda_client_check,
 *   ruda_client_sync_buffers and reads of the buffers they would have
 *   written.
 * - A ruda_client may be used from several threads at once.
 * - libruda's own threads (docs/threads.md): each ruda_future runs on a
 *   thread of its own, from ruda_client_read_async or
 *   ruda_client_read_tensor_async until ruda_future_wait joins it. The
 *   first copy of 1 MiB or more into or out of an arena starts a pool of
 *   up to 7 detached helper threads (one fewer than the CPUs;
 *   $RUDA_COPY_THREADS overrides, 0 = none), shared by all clients of the
 *   process and kept until it exits; a forked child copies alone. All other
 *   work runs on the calling threads: one of the threads waiting for a
 *   reply reads the socket for all of them. Callbacks (exclusive, profile,
 *   allocation windows, measure_throughput's probe) run on the caller's
 *   thread.
 * - Pointers passed in are borrowed for the duration of the call only.
 *
 * Structs that grow (ABI rule, since libruda.so.1): every struct that
 * crosses the API by pointer and may gain fields in a later version
 * (options and descriptors in; properties, usage and stats out) begins
 * with `uint32_t struct_size`, which the caller sets to the sizeof it
 * was compiled with. Its RUDA_<NAME>_INIT macro does that and zeroes the rest:
 *     ruda_connect_options o = RUDA_CONNECT_OPTIONS_INIT;
 *     ruda_kernel_desc k = {.struct_size = sizeof(k), .spirv = words, ...};
 * - In (ruda_connect_options, ruda_layout_desc, ruda_copy_desc,
 *   ruda_kernel_desc): libruda reads only the first struct_size bytes; a field
 *   past them takes its default (what the INIT macro gives, 0). Bytes past
 *   the fields this libruda knows must be 0, else RUDA_ERROR_UNSUPPORTED
 *   (the caller asks for something this version cannot do).
 * - Out (ruda_features, ruda_device_properties, ruda_memory_usage,
 *   ruda_layout, ruda_resource, ruda_daemon_stats, ruda_target_properties,
 *   ruda_device_utilization): libruda writes only the first struct_size bytes
 *   (bytes past the fields it knows are zeroed) and leaves struct_size as given.
 * - A struct_size below the struct's first published size (this version's)
 *   fails the call with RUDA_ERROR_INVALID_ARGUMENT before anything is done;
 *   so does 0 (a struct that was not initialised).
 * - Arrays of them (descs[count], out[count]): element i lies i * struct_size
 *   bytes after the first, struct_size being the first element's; the
 *   other elements' struct_size are not read (in) and are set to it (out).
 * - ruda_features inside ruda_device_properties: its struct_size is set by
 *   libruda. Should ruda_features grow, ruda_device_properties keeps this
 *   layout for its last member (under a frozen type name), so each grows
 *   by appending.
 * Small value structs stay as they are, without a size: ruda_handle,
 * ruda_count, ruda_device_id, ruda_staging (names of things, copied by
 * value and filled whole: a new field would be a new kind of name),
 * ruda_coop_matrix_shape, ruda_memory_heap and ruda_spec_constant (fixed
 * elements of arrays, mirroring Vulkan's own fixed structs).
 */
#ifndef RUDA_RUDA_H
#define RUDA_RUDA_H

#include <stddef.h>
#include <stdint.h>

/* ruda_status (RUDA_OK, RUDA_ERROR_...) and ruda_strerror: generated from
 * enum Status of proto/ruda.proto, their one definition. */
#include <ruda/status.h>
/* Definitions rudad shares: RUDA_PROTOCOL_VERSION, RUDA_PRIORITY_*,
 * ruda_elem_type, ruda_allocation_mode, ruda_spec_constant, ruda_reduce_op. */
#include <ruda/common.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ruda_client ruda_client;

/*
 * A buffer, or a slice of one. `id` names the allocation inside the session;
 * `offset` and `size` select the bytes a read or a kernel binding sees.
 * Handles are plain values: copying one does not add a reference.
 */
typedef struct ruda_handle {
	uint64_t id;
	uint64_t offset;
	uint64_t size;
} ruda_handle;

/* A registered kernel, valid in the client that registered it. */
typedef uint64_t ruda_kernel;

/* Workgroup count of a launch. */
typedef struct ruda_count {
	uint32_t x, y, z;
} ruda_count;

typedef enum ruda_device_type {
	RUDA_DEVICE_OTHER = 0,
	RUDA_DEVICE_INTEGRATED_GPU = 1,
	RUDA_DEVICE_DISCRETE_GPU = 2,
	RUDA_DEVICE_VIRTUAL_GPU = 3,
	RUDA_DEVICE_CPU = 4,
} ruda_device_type;

/*
 * A device as the seed names it (DeviceId): its type (a ruda_device_type
 * value) and its index among the daemon's devices of that type.
 */
typedef struct ruda_device_id {
	uint16_t type_id;
	uint32_t index_id;
} ruda_device_id;

/* ruda_elem_type (RUDA_ELEM_*, RUDA_ELEM_SIZE) is in <ruda/common.h>. */

/* A cooperative-matrix (tensor core) shape: D (MxN) = A (MxK) * B (KxN) + C. */
typedef struct ruda_coop_matrix_shape {
	uint32_t m, n, k;
	ruda_elem_type a, b, c, d;
} ruda_coop_matrix_shape;

#define RUDA_MAX_COOP_SHAPES 32
#define RUDA_MAX_HEAPS 16

/* What kernels may use on a device (the seed's Features). */
typedef struct ruda_features {
	uint32_t struct_size; /* sizeof(ruda_features) (its _INIT sets it) */
	uint32_t elem_types;        /* bit (1u << ruda_elem_type) per type kernels may use */
	uint32_t atomic_elem_types; /* types with buffer atomics */
	uint32_t subgroup_operations; /* VkSubgroupFeatureFlags */
	uint32_t coop_matrix_count;
	ruda_coop_matrix_shape coop_matrix[RUDA_MAX_COOP_SHAPES];
} ruda_features;
#define RUDA_FEATURES_INIT {.struct_size = sizeof(ruda_features)}

typedef struct ruda_memory_heap {
	uint64_t size;
	int device_local;
} ruda_memory_heap;

/* What the daemon reports about the device of a session. */
typedef struct ruda_device_properties {
	uint32_t struct_size; /* sizeof(ruda_device_properties) (its _INIT sets it) */
	uint32_t index;
	char name[256];
	uint32_t vendor_id;
	uint32_t device_id;
	ruda_device_type type;
	uint32_t api_version;
	uint32_t driver_version;
	uint8_t pipeline_cache_uuid[16];
	/* the largest buffer: the device's maxBufferSize or heap, whichever is
	 * smaller (may pass 4 GiB and maxMemoryAllocationSize: a driver may
	 * still refuse one allocation past the latter, RUDA_ERROR_TOO_LARGE) */
	uint64_t max_buffer_size;
	uint64_t max_storage_buffer_range;
	uint32_t min_storage_buffer_offset_alignment;
	uint32_t max_push_constants_size;
	uint32_t max_bindings;
	uint32_t max_workgroup_count[3];
	uint32_t max_workgroup_size[3];
	uint32_t max_workgroup_invocations;
	uint32_t subgroup_size;
	uint64_t device_local_bytes;
	int host_import; /* arenas are DMA'd directly (no copy in the daemon) */
	ruda_device_id id;
	uint32_t physical_index; /* devices with the same one share the hardware */
	uint32_t min_subgroup_size, max_subgroup_size;
	uint32_t max_shared_memory; /* bytes of workgroup memory */
	uint32_t max_storage_buffers; /* per kernel */
	uint32_t timestamp_period_ps;
	uint32_t spirv_version; /* 0x00MMmm00 */
	int memory_budget;      /* utilization's heap figures come from the driver */
	uint32_t heap_count;
	ruda_memory_heap heaps[RUDA_MAX_HEAPS];
	ruda_features features;
} ruda_device_properties;
#define RUDA_DEVICE_PROPERTIES_INIT {.struct_size = sizeof(ruda_device_properties)}

typedef struct ruda_connect_options {
	uint32_t struct_size; /* sizeof(ruda_connect_options) (its _INIT sets it) */
	/* Socket path; NULL: $RUDA_SOCKET, else /run/ruda/rudad.sock for root,
	 * else $XDG_RUNTIME_DIR/ruda/rudad.sock. */
	const char *socket_path;
	/* Shown by rudactl; NULL: the program's name. */
	const char *client_name;
	/* Index of the daemon's device to use. */
	uint32_t device_index;
	/* Non-zero: use the device `device_id` names instead of device_index. */
	int use_device_id;
	ruda_device_id device_id;
	/* Scheduling priority asked for, RUDA_PRIORITY_LOWEST..HIGHEST (in
	 * <ruda/common.h>); 0: the daemon's default (RUDA_PRIORITY_NORMAL).
	 * The daemon grants at most
	 * what its policy allows this user (ruda_client_priority says what was
	 * granted); other values fail with RUDA_ERROR_INVALID_ARGUMENT. While a
	 * client of higher priority has work, rudad holds back the submissions
	 * of lower ones. */
	uint32_t priority;
	/* Non-zero: the session's arena is the caller's own memfd `arena_fd`
	 * (borrowed: libruda maps it during the call; the caller may close it
	 * afterwards), using `arena_size` bytes of it (0: all of it), rounded
	 * down to the device's import granularity (4 KiB to 64 KiB). rudad
	 * requires a memfd sealed with F_SEAL_SHRINK and not against writing
	 * (F_SEAL_WRITE, F_SEAL_FUTURE_WRITE), holding `arena_size` bytes, and a size within its arena limits (1 MiB
	 * to 4 GiB); else ruda_client_connect fails with
	 * RUDA_ERROR_INVALID_ARGUMENT (the fd) or RUDA_ERROR_OUT_OF_RANGE (the
	 * size), and rudad logs why (the Hello reply's message says it too).
	 * rudad seals it with F_SEAL_GROW too when it still takes seals, and
	 * writes the arena's header into its first 4 KiB. */
	int use_arena_fd;
	int arena_fd;
	uint64_t arena_size;
} ruda_connect_options;
#define RUDA_CONNECT_OPTIONS_INIT {.struct_size = sizeof(ruda_connect_options)}

/* ---- connection (ErasedClient::load) ---------------------------------- */

/*
 * Connect to rudad and open a session. `options` may be NULL for the
 * defaults. On success *out owns the connection until ruda_client_close;
 * on failure *out is NULL and ruda_client_last_error(NULL, ...) says why
 * in one sentence naming the socket (per thread, like errno):
 *   RUDA_ERROR_DISCONNECTED   no socket at the path, or nothing listens on it
 *   RUDA_ERROR_PERMISSION     the socket's permissions refuse this user (the
 *                             message names the group to join), or rudad's
 *                             policy refuses this uid
 *   RUDA_ERROR_BUSY           rudad is at a connection limit (the message
 *                             names it: max_clients, admin_reserved_clients,
 *                             max_pending_per_uid)
 *   RUDA_ERROR_INVALID_ARGUMENT  no path to try (neither socket_path,
 *                             $RUDA_SOCKET nor $XDG_RUNTIME_DIR for a
 *                             non-root user), or a path over 107 bytes
 *   RUDA_ERROR_VERSION        rudad speaks another protocol version
 * and the device and arena errors of the options above.
 */
ruda_status ruda_client_connect(const ruda_connect_options *options, ruda_client **out);

/* Release everything the session holds and close it. NULL is allowed. */
void ruda_client_close(ruda_client *client);

/*
 * Why the calling thread's last failed call on `client` failed, copied
 * into `buf` (always NUL-terminated when len > 0; `buf` may be NULL when
 * len is 0). Returns its length. Per thread, like errno, and per client:
 * another thread's failures, on this client or any other, never change
 * what this thread reads, and a thread keeps the messages of its last 4
 * clients that failed (an older one reads as "").
 * - Set by a call on `client` that fails with a reason beyond its status:
 *   rudad's message for a refused request or a failed sync (the reason of
 *   the error it reports), libruda's own sentence (a request over the
 *   frame limit, an arena too small), or why the connection is gone (rudad
 *   closed it, or said why in a notice: every thread's next failing call
 *   gets that reason). ruda_future_wait gives the waiting thread the
 *   message of the future's failure.
 * - Not set by calls refused on their arguments before anything is done
 *   (a NULL pointer, a struct_size too small): the status says it all.
 * - Success does not clear it: read it right after the failing call.
 * With client NULL: why this thread's last ruda_client_connect failed
 * ("" after a success).
 */
size_t ruda_client_last_error(ruda_client *client, char *buf, size_t len);

/* The scheduling priority rudad granted this client (1..7). */
uint32_t ruda_client_priority(const ruda_client *client);

/* Runtime name ("ruda"), for logs and caches (ErasedClient::name). */
const char *ruda_client_name(const ruda_client *client);

/* The daemon-side session id (part of ErasedClient::service_id); 0 for NULL. */
uint64_t ruda_client_session_id(const ruda_client *client);

/* Properties of this session's device, copied into *out. */
ruda_status ruda_client_properties(const ruda_client *client, ruda_device_properties *out);

/* ---- memory ----------------------------------------------------------- */

/*
 * Allocate `size` bytes on the device and upload `data` into them
 * (ErasedClient::create and create_from_slice). `data` may be reused as soon
 * as the call returns. The upload is work of the client's current stream:
 * before another stream uses the buffer, sync this one (see "Streams").
 */
ruda_status ruda_client_create(ruda_client *client, const void *data, size_t size,
			       ruda_handle *out);

/* Allocate `size` uninitialised bytes (ErasedClient::empty). */
ruda_status ruda_client_empty(ruda_client *client, size_t size, ruda_handle *out);

/*
 * Allocate `size` bytes and say at once whether that worked
 * (ErasedClient::try_empty): RUDA_ERROR_OUT_OF_MEMORY,
 * RUDA_ERROR_TOO_LARGE (over one buffer's limit) or RUDA_ERROR_QUOTA (over
 * this client's or its user's memory quota). No handle is left on failure.
 */
ruda_status ruda_client_try_empty(ruda_client *client, size_t size, ruda_handle *out);

/*
 * Allocator accounting (ErasedClient::memory_usage). The seed's fields
 * (allocations, bytes_in_use, bytes_padding, bytes_reserved) and quota and
 * pages are this client's own: another client's buffers never show in
 * them. uid_bytes is its user's (all clients of that uid); the device_*
 * fields are the whole device's (all clients of the device, kept and empty
 * pages included; logical devices on one physical device each count their
 * own).
 */
typedef struct ruda_memory_usage {
	uint32_t struct_size; /* sizeof(ruda_memory_usage) (its _INIT sets it) */
	uint64_t allocations;    /* this client's buffers */
	uint64_t bytes_in_use;   /* bytes they asked for */
	uint64_t bytes_padding;  /* reserved for them beyond that (alignment) */
	uint64_t bytes_reserved; /* device memory its buffers occupy: in use + padding
				  * (what its quota counts) */
	uint64_t quota;          /* this client's limit, 0 = none */
	uint64_t uid_bytes;      /* held by all clients of this user */
	uint64_t pages;          /* this client's buffers with a device allocation of
				  * their own (large or dedicated ones); the others
				  * share pages with other clients' buffers */
	uint64_t device_bytes_reserved; /* device memory rudad holds, for all clients */
	uint64_t device_pages;          /* device allocations rudad holds, for all clients */
} ruda_memory_usage;
#define RUDA_MEMORY_USAGE_INIT {.struct_size = sizeof(ruda_memory_usage)}

ruda_status ruda_client_memory_usage(ruda_client *client, ruda_memory_usage *out);
/* Give back device memory no buffer uses (ErasedClient::memory_cleanup). */
ruda_status ruda_client_memory_cleanup(ruda_client *client);
/* ErasedClient::memory_compact: free space coalesces as buffers go, so this
 * only confirms that. */
ruda_status ruda_client_memory_compact(ruda_client *client);

/* Copy `size` bytes from `data` into `handle` at byte `offset` of it.
 * Large copies (here, in ruda_client_create and in the reads) cross the
 * session arena in chunks of a quarter of it, up to four in flight: the
 * client copies one while the device moves the others. The copies use up
 * to 7 helper threads ($RUDA_COPY_THREADS: 0-31) and, with
 * $RUDA_COPY_STREAM=1, non-temporal stores. On hosts of 8 CPUs or more
 * the helpers, and the caller waiting for them, watch for the next chunk
 * for 200 µs before they sleep ($RUDA_COPY_SPIN_US: microseconds, 0 = sleep
 * at once). */
ruda_status ruda_client_write(ruda_client *client, ruda_handle handle, uint64_t offset,
			      const void *data, size_t size);

/*
 * Read `count` buffers (ErasedClient::read): dst[i] receives handles[i].size
 * bytes. Waits for the work that writes them; returns the first error.
 */
ruda_status ruda_client_read(ruda_client *client, const ruda_handle *handles, size_t count,
			     void *const *dst);

/* Read one buffer into `dst` (handle.size bytes) (ErasedClient::read_one). */
ruda_status ruda_client_read_one(ruda_client *client, ruda_handle handle, void *dst);

/* Drop a buffer; its memory is freed when work using it is done. */
ruda_status ruda_client_release(ruda_client *client, ruda_handle handle);

/* ---- tensors (create_tensor(s), empty_tensor(s), read_tensor) ---------- */

/* Dimensions a tensor layout may have. */
#define RUDA_MAX_RANK 8

/* How a tensor's elements are laid out in its buffer (MemoryLayoutStrategy). */
typedef enum ruda_layout_strategy {
	RUDA_LAYOUT_CONTIGUOUS = 0, /* packed row-major */
	RUDA_LAYOUT_OPTIMIZED = 1,  /* rows pitched where that helps (docs/memory.md) */
} ruda_layout_strategy;

/* A tensor to allocate (MemoryLayoutDescriptor): shape outermost first. */
typedef struct ruda_layout_desc {
	uint32_t struct_size; /* sizeof(ruda_layout_desc) (its _INIT sets it) */
	ruda_layout_strategy strategy;
	uint32_t rank; /* 1..RUDA_MAX_RANK */
	uint64_t shape[RUDA_MAX_RANK];
	uint64_t elem_size; /* bytes of one element */
} ruda_layout_desc;
#define RUDA_LAYOUT_DESC_INIT {.struct_size = sizeof(ruda_layout_desc)}

/* An allocated tensor (MemoryLayout): its bytes and the strides chosen, in
 * elements, outermost first. */
typedef struct ruda_layout {
	uint32_t struct_size; /* sizeof(ruda_layout) (its _INIT sets it) */
	ruda_handle handle;
	uint32_t rank;
	uint64_t strides[RUDA_MAX_RANK];
} ruda_layout;
#define RUDA_LAYOUT_INIT {.struct_size = sizeof(ruda_layout)}

/* A tensor to read (CopyDescriptor): `handle` holds element 0; element
 * (i0, i1, ...) lies at byte handle.offset + elem_size * sum(ik * strides[k]). */
typedef struct ruda_copy_desc {
	uint32_t struct_size; /* sizeof(ruda_copy_desc) (its _INIT sets it) */
	ruda_handle handle;
	uint32_t rank;
	uint64_t shape[RUDA_MAX_RANK];
	uint64_t strides[RUDA_MAX_RANK]; /* elements */
	uint64_t elem_size;
} ruda_copy_desc;
#define RUDA_COPY_DESC_INIT {.struct_size = sizeof(ruda_copy_desc)}

/*
 * Allocate `count` tensors in one buffer, each at an offset aligned for
 * binding, and upload data[i] (packed row-major, product(shape) *
 * elem_size bytes; NULL in empty_tensors) into each with the layout chosen
 * (ErasedClient::create_tensors). out[i] gets each tensor's slice and
 * strides. The shared buffer is freed when every tensor of the call has
 * been released.
 */
ruda_status ruda_client_create_tensors(ruda_client *client, const ruda_layout_desc *descs,
				       const void *const *data, size_t count, ruda_layout *out);
ruda_status ruda_client_create_tensor(ruda_client *client, const ruda_layout_desc *desc,
				      const void *data, ruda_layout *out);
/* The same without data (ErasedClient::empty_tensors). */
ruda_status ruda_client_empty_tensors(ruda_client *client, const ruda_layout_desc *descs,
				      size_t count, ruda_layout *out);
ruda_status ruda_client_empty_tensor(ruda_client *client, const ruda_layout_desc *desc,
				     ruda_layout *out);

/*
 * Whether a layout is read as it lies, with no gather on the device
 * (ErasedClient::can_read_tensor): packed row-major strides, or rows at a
 * pitch (the last dimension packed, the others packed over rows of at
 * least a row's elements), as the optimized layout of create_tensor
 * returns; the pitch padding is read too and dropped. Dimensions of size 1
 * may have any stride.
 */
int ruda_client_can_read_tensor(const ruda_client *client, uint32_t rank, const uint64_t *shape,
				const uint64_t *strides);

/*
 * Read `count` tensors into packed row-major bytes: dst[i] receives
 * product(shape) * elem_size bytes (ErasedClient::read_tensor). Layouts
 * can_read_tensor refuses are packed on the device by the built-in gather
 * kernel first (elements of 4, 8, 12 or 16 bytes, up to 4 dimensions that
 * do not merge), or else gathered from their byte span on the host.
 */
ruda_status ruda_client_read_tensor(ruda_client *client, const ruda_copy_desc *descs,
				    size_t count, void *const *dst);

/* ---- asynchronous reads (read_async, read_tensor_async) ---------------- */

/*
 * A read in progress. It reads what the buffers held at the call: writes,
 * launches and releases made after it do not change its result (each
 * buffer is copied on the device, in stream order, before the call
 * returns; the copy counts against the client's quota until the future has
 * read it, and a copy that does not fit fails the future with
 * RUDA_ERROR_QUOTA or RUDA_ERROR_OUT_OF_MEMORY). Each future runs on a
 * thread of its own. The destination memory must stay valid until the
 * future is waited for; every future is waited for exactly once, and before
 * its client is closed.
 */
typedef struct ruda_future ruda_future;

/* ruda_client_read without waiting for it (ErasedClient::read_async). */
ruda_status ruda_client_read_async(ruda_client *client, const ruda_handle *handles,
				   size_t count, void *const *dst, ruda_future **out);
/* ruda_client_read_tensor without waiting (ErasedClient::read_tensor_async). */
ruda_status ruda_client_read_tensor_async(ruda_client *client, const ruda_copy_desc *descs,
					  size_t count, void *const *dst, ruda_future **out);
/* 1 once the read is over (ruda_future_wait will not block), else 0. */
int ruda_future_poll(const ruda_future *future);
/* Wait for the read, free the future and return the read's status. */
ruda_status ruda_future_wait(ruda_future *future);

/* ---- allocation modes and exported memory ------------------------------- */

/* ruda_allocation_mode (RUDA_ALLOCATION_*) is in <ruda/common.h>. */
/* Allocate this client's next buffers in `mode` (ErasedClient::allocation_mode).
 * Applies to allocations asked for after it, from every thread. */
ruda_status ruda_client_allocation_mode(ruda_client *client, ruda_allocation_mode mode);
/* Run task(user) with `mode`, then restore the mode before it
 * (memory_persistent_allocation / memory_dedicated_allocation). */
ruda_status ruda_client_allocation_window(ruda_client *client, ruda_allocation_mode mode,
					  void (*task)(void *user), void *user);

/*
 * A buffer's device memory as a file descriptor (get_resource), with what
 * an importer must repeat (docs/memory.md shows the import): a VkBuffer of
 * `buffer_size` bytes and `buffer_usage`, created with
 * VkExternalMemoryBufferCreateInfo(`handle_type`); then vkAllocateMemory of
 * exactly `memory_size` bytes of type `memory_type_index` with
 * VkImportMemoryFdInfoKHR(`fd`) and, when `dedicated`,
 * VkMemoryDedicatedAllocateInfo naming that buffer; on the physical device
 * whose deviceUUID and driverUUID are these.
 */
typedef struct ruda_resource {
	uint32_t struct_size; /* sizeof(ruda_resource) (its _INIT sets it) */
	int fd;                     /* opaque fd (VK_KHR_external_memory_fd); the caller's */
	uint64_t memory_size;       /* bytes of the exported allocation */
	uint64_t offset;            /* where the buffer starts in it */
	uint64_t size;              /* the buffer's bytes */
	uint32_t memory_type_index; /* on the exporting device */
	uint8_t device_uuid[16];    /* import only on a device with this UUID */
	uint8_t driver_uuid[16];    /* ... and this driver UUID */
	int dedicated;              /* memory dedicated to its buffer */
	uint64_t buffer_size;       /* VkBufferCreateInfo::size of that buffer */
	uint32_t buffer_usage;      /* VkBufferCreateInfo::usage of that buffer */
	uint32_t handle_type;       /* VkExternalMemoryHandleTypeFlagBits of fd */
	uint32_t memory_property_flags; /* of the memory type (host visible?) */
} ruda_resource;
#define RUDA_RESOURCE_INIT {.struct_size = sizeof(ruda_resource)}

/*
 * Export `handle`'s memory (ErasedClient::get_resource): the buffer's own
 * memory, not a copy, so writes on either side are seen on the other once
 * the writer's work is done. The buffer must have been allocated in
 * RUDA_ALLOCATION_DEDICATED mode (pooled memory holds other buffers):
 * else RUDA_ERROR_INVALID_ARGUMENT, as for a buffer ruda_client_to_client
 * made (its memory may be lent by the source's device). RUDA_ERROR_INVALID_HANDLE for a handle
 * the client does not own; RUDA_ERROR_UNSUPPORTED where the device cannot
 * export (or rudad.conf says export_memory = no), the reason in
 * ruda_client_last_error. Each call gives a new fd, owned by the caller.
 * The memory stays valid while the fd or an import of it lives, even once
 * the buffer is released; its contents are those of the buffer once the
 * work writing it is done (ruda_client_sync_buffers).
 */
ruda_status ruda_client_get_resource(ruda_client *client, ruda_handle handle,
				     ruda_resource *out);

/* ---- staging regions (ErasedClient::staging) ---------------------------- */

/*
 * Shared memory the daemon reads and writes directly: bytes written into
 * `data` become a buffer with one device copy and no host copy
 * (ruda_client_create_from_staging), and downloads land in it the same way.
 * Its bytes must not change while work that reads them is pending
 * (ruda_client_sync_buffers on the buffer, or ruda_client_sync, says when
 * that is over).
 */
typedef struct ruda_staging {
	uint64_t id;  /* the region's name in the session */
	void *data;   /* mapped in this process */
	size_t size;
} ruda_staging;

/* A new region of at least `size` bytes (a sealed memfd libruda makes). */
ruda_status ruda_client_staging_create(ruda_client *client, size_t size, ruda_staging *out);
/*
 * Use the caller's memfd `fd` (borrowed; the caller may close it after the
 * call) as a region of `size` bytes. The daemon refuses, with
 * RUDA_ERROR_INVALID_ARGUMENT and the reason in ruda_client_last_error, an
 * fd that is not a memfd (the message names what it is: "an eventfd, not
 * a memfd"), one not sealed with F_SEAL_SHRINK, one sealed against
 * writing (F_SEAL_WRITE, F_SEAL_FUTURE_WRITE: rudad downloads into it),
 * and one smaller than `size` rounded up to 64 KiB (the import granularity
 * of common devices; page size on others). rudad reads the size only after
 * it saw F_SEAL_SHRINK, so shrinking the memfd meanwhile gets a refusal.
 */
ruda_status ruda_client_staging_attach(ruda_client *client, int fd, size_t size,
				       ruda_staging *out);
/* Unmap and forget a region; copies already asked for still complete. */
ruda_status ruda_client_staging_release(ruda_client *client, ruda_staging *staging);
/* A new buffer holding `size` bytes of the region from `offset`. */
ruda_status ruda_client_create_from_staging(ruda_client *client, const ruda_staging *staging,
					    uint64_t offset, size_t size, ruda_handle *out);
/* Copy `size` region bytes from `staging_offset` into `handle` at `offset`. */
ruda_status ruda_client_write_from_staging(ruda_client *client, ruda_handle handle,
					   uint64_t offset, const ruda_staging *staging,
					   uint64_t staging_offset, size_t size);
/* Read `handle` (handle.size bytes) into the region at `staging_offset`;
 * returns once the bytes are there. */
ruda_status ruda_client_read_to_staging(ruda_client *client, ruda_handle handle,
					const ruda_staging *staging, uint64_t staging_offset);

/* ---- kernels ---------------------------------------------------------- */

/* ruda_spec_constant is in <ruda/common.h>. */
typedef struct ruda_kernel_desc {
	uint32_t struct_size; /* sizeof(ruda_kernel_desc) (its _INIT sets it) */
	const uint32_t *spirv; /* SPIR-V words */
	size_t spirv_size;     /* in bytes */
	const char *entry_point;
	uint32_t binding_count;      /* storage buffers at set 0, bindings 0..n-1 */
	uint32_t push_constant_size; /* bytes, multiple of 4 */
	const ruda_spec_constant *spec_constants; /* may be NULL */
	uint32_t spec_constant_count;
} ruda_kernel_desc;
#define RUDA_KERNEL_DESC_INIT {.struct_size = sizeof(ruda_kernel_desc)}

/*
 * Validate and compile a kernel in the daemon; waits for the verdict.
 * RUDA_ERROR_INVALID_KERNEL (with ruda_client_last_error saying why) when
 * the module is refused. A module the daemon already holds (any client
 * registered it) is not compiled again, and large ones are not even sent:
 * they are named by their SHA-256.
 * Also RUDA_ERROR_INVALID_KERNEL, the reason naming the limit and both
 * values, when the module (with `spec_constants` applied) asks for more
 * than the device gives or rudad compiles: a workgroup over
 * maxComputeWorkGroupSize or maxComputeWorkGroupInvocations, shared memory
 * over maxComputeSharedMemorySize, over 16 KiB of private (Private and
 * Function) memory per invocation, over 2^20 words, calls nested over 64
 * deep or recursive, or over 2^18 instructions once every call is inlined.
 */
ruda_status ruda_client_kernel_register(ruda_client *client, const ruda_kernel_desc *desc,
					ruda_kernel *out);

/* Whether the daemon already holds this SPIR-V module (*held = 1 or 0). */
ruda_status ruda_client_kernel_lookup(ruda_client *client, const uint32_t *spirv,
				      size_t spirv_size, int *held);

ruda_status ruda_client_kernel_release(ruda_client *client, ruda_kernel kernel);

/*
 * Launch `kernel` with `count` workgroups (ErasedClient::launch). Binding i
 * is bindings[i]; `push` holds push_size bytes of push constants. Accesses
 * outside the bound ranges cannot touch other memory. A count over the
 * device's max_workgroup_count in any dimension, or counts whose product
 * x*y*z reaches 2^32, fail with RUDA_ERROR_INVALID_ARGUMENT (at the next
 * sync, and on the buffers the launch may write).
 * A failed launch's error is recorded on the stream and on the bindings the
 * kernel may write, never on those it only reads: a binding whose SPIR-V
 * variables are all NonWritable (GLSL `readonly buffer`) keeps its bytes
 * and stays readable. An input that already carries an error fails the
 * launch with it, passing it on to the outputs. With an unknown kernel,
 * every binding is marked (docs/protocol.md, "Launch").
 */
ruda_status ruda_client_launch(ruda_client *client, ruda_kernel kernel, ruda_count count,
			       const ruda_handle *bindings, size_t binding_count,
			       const void *push, size_t push_size);

/* As ruda_client_launch, without the bounds guarantee where the daemon's
 * policy allows it (ErasedClient::launch_unchecked). */
ruda_status ruda_client_launch_unchecked(ruda_client *client, ruda_kernel kernel,
					 ruda_count count, const ruda_handle *bindings,
					 size_t binding_count, const void *push,
					 size_t push_size);

/*
 * Launch with dynamic counts (RudaCount::Dynamic): the workgroup counts are
 * three uint32 words at byte counts.offset (a multiple of 4) of buffer
 * counts.id, read by the device when the launch runs, after the work before
 * it on the stream. Each count is clamped to the device's
 * max_workgroup_count, and counts whose clamped product reaches 2^32 run
 * nothing (no error: they are known only on the device), so any value is
 * safe. Bounds-checked as ruda_client_launch.
 */
ruda_status ruda_client_launch_dynamic(ruda_client *client, ruda_kernel kernel,
				       ruda_handle counts, const ruda_handle *bindings,
				       size_t binding_count, const void *push, size_t push_size);

/* ---- execution -------------------------------------------------------- */

/*
 * Streams: work on one stream runs in order; different streams are
 * unordered unless the caller orders them (a sync). That holds for every
 * request that touches a buffer, its creation with data and writes
 * included: a kernel on stream 1 may run before (and an upload on stream 0
 * then overwrite what it wrote) unless stream 0 was synced first. Only the
 * zeros of a new buffer created without data are ordered by rudad before
 * any stream's use. Errors are recorded on
 * the stream of the request that failed, and ruda_client_sync waits for and
 * reports the current stream. A client starts on stream 0; rudad allows 64
 * more per client.
 */
typedef uint32_t ruda_stream;

/* The stream this client's requests go to (ErasedClient::execution_stream). */
ruda_stream ruda_client_execution_stream(const ruda_client *client);
/* Send this client's requests to `stream` from now on
 * (ErasedClient::set_stream). The caller orders accesses across streams. */
ruda_status ruda_client_set_stream(ruda_client *client, ruda_stream stream);
/* Whether both handles reach the same session and stream
 * (ErasedClient::same_execution_queue). */
int ruda_client_same_execution_queue(const ruda_client *a, const ruda_client *b);


/* Send queued requests and have the daemon submit them; no wait. */
ruda_status ruda_client_flush(ruda_client *client);

/* Wait for all work of the stream; return (and clear) its first error.
 * Watches the device's progress for up to 1 ms (200 µs on hosts of fewer
 * than 8 CPUs; $RUDA_SYNC_SPIN_US: microseconds, 0 = none), yielding the
 * processor between looks, before it sleeps until rudad's reply. */
ruda_status ruda_client_sync(ruda_client *client);

/* The error recorded against any of `handles`, without waiting. */
ruda_status ruda_client_check(ruda_client *client, const ruda_handle *handles, size_t count);

/*
 * Wait for the work touching `handles`, then report their errors. Only the
 * last work that used each buffer is waited for, not the whole stream: a
 * long kernel submitted after a buffer's last use does not delay it
 * (ruda_client_flush after the buffer's work lets it go ahead of work
 * queued behind it; what was sent in the same batch is waited for too).
 */
ruda_status ruda_client_sync_buffers(ruda_client *client, const ruda_handle *handles,
				     size_t count);

/* ---- profiling and exclusive access ------------------------------------ */

/*
 * A profiling window measures this client's own device time: the sum of the
 * device time of each of its submissions (any of its streams) holding work
 * it sent between the window's start and end. Other clients' work on the
 * shared device never counts, even when this client's work waited behind
 * it; nor does time this client's queue stood idle. A submission's time runs
 * from when the work before it on the device had finished (timestamps on
 * GPUs; on CPU drivers such as lavapipe, from its submission or the previous
 * completion, whichever is later) until its own end. Windows may overlap;
 * each counts every submission inside it.
 */
typedef uint64_t ruda_profile_window;

/* Open a window (ErasedClient::profile_start); what was sent before it is
 * submitted now and not counted. */
ruda_status ruda_client_profile_start(ruda_client *client, ruda_profile_window *out);
/* Close it and wait for this client's device time inside it
 * (ErasedClient::profile_end). RUDA_ERROR_BUSY when more than 64 of the
 * client's windows were measuring at once when it opened. */
ruda_status ruda_client_profile_end(ruda_client *client, ruda_profile_window window,
				    uint64_t *duration_ns);
/* Forget a window (ErasedClient::profile_abandon). */
ruda_status ruda_client_profile_abandon(ruda_client *client, ruda_profile_window window);
/* Run task(user) inside a window (ErasedClient::profile); `name` is for the
 * caller's logs. */
ruda_status ruda_client_profile(ruda_client *client, void (*task)(void *user), void *user,
				const char *name, uint64_t *duration_ns);

/*
 * Hold the device alone: other clients' requests wait until
 * ruda_client_exclusive_end, this client's end, or `timeout_ms` (capped by
 * the daemon's max_exclusive_ms; 0 = that limit). Waits until granted: after
 * another's lease, and after this uid's own last lease for as long as the
 * daemon's exclusive_share asks (by default as long as that lease lasted).
 * RUDA_ERROR_PERMISSION when the daemon's policy (exclusive_users,
 * exclusive_groups) does not let this uid take leases.
 */
ruda_status ruda_client_exclusive_begin(ruda_client *client, uint32_t timeout_ms);
/*
 * End the lease. RUDA_ERROR_LEASE_EXPIRED when it ran out first (after
 * `timeout_ms` or max_exclusive_ms; the message says after how many ms):
 * the client's work since then ran beside other clients' (its results are
 * still right; only the exclusivity was lost). That is told to this call
 * only, once: syncs and other calls of the holder are not failed by an
 * expiry. RUDA_ERROR_INVALID_ARGUMENT when no lease is held otherwise.
 */
ruda_status ruda_client_exclusive_end(ruda_client *client);
/* Run task(user) holding the device alone (ErasedClient::exclusive);
 * RUDA_ERROR_LEASE_EXPIRED when the lease ran out before the task ended. */
ruda_status ruda_client_exclusive(ruda_client *client, void (*task)(void *user), void *user);

/* ---- graphs ------------------------------------------------------------ */

/*
 * A graph: launches captured on the client's stream and kept by rudad as a
 * reusable command buffer; a replay enqueues all of them with one request,
 * on the stream they were captured on. The buffers and kernels a graph uses
 * stay alive while it lives (releasing their handles does not free them).
 * While a stream captures, its launches are recorded, not run; reads,
 * writes, syncs, sync_buffers and profiling on it are refused
 * (RUDA_ERROR_INVALID_ARGUMENT; a write also fails the capture).
 */
typedef struct ruda_graph ruda_graph;

/* Submit what the stream has queued, ready for a capture
 * (ErasedClient::graph_prepare). */
ruda_status ruda_client_graph_prepare(ruda_client *client);
/* Start capturing the client's stream (ErasedClient::graph_start_capture);
 * RUDA_ERROR_INVALID_ARGUMENT when it is capturing already. */
ruda_status ruda_client_graph_start_capture(ruda_client *client);
/* End the capture and make its graph (ErasedClient::graph_stop_capture): the
 * first error a captured request met is returned instead (and no graph is
 * made). The capture ends either way. */
ruda_status ruda_client_graph_stop_capture(ruda_client *client, ruda_graph **out);
/* End the capture, forgetting it (ErasedClient::graph_abort_capture). */
ruda_status ruda_client_graph_abort_capture(ruda_client *client);
/* Enqueue the graph's launches on its capture stream (Graph::replay). No
 * wait: errors surface at the next sync of that stream. The caller keeps
 * the buffers free of concurrent accesses. */
ruda_status ruda_graph_replay(ruda_graph *graph);
/* Forget the graph (Rust drops it); replays in flight complete. Release a
 * client's graphs before closing the client (rudad drops them with the
 * session anyway). */
void ruda_graph_release(ruda_graph *graph);

/* ---- throughput cache -------------------------------------------------- */

/*
 * The throughput measured for `key` on this client's device
 * (ErasedClient::measure_throughput): from rudad's cache, shared by all its
 * clients, or, on a miss, by calling probe(user, &value) once and recording
 * its answer for everyone. A probe returning non-zero records nothing and
 * makes the call return RUDA_ERROR_UNSUPPORTED. rudad records only finite
 * values above 0: another answer from the probe makes the call return
 * RUDA_ERROR_INVALID_ARGUMENT. Once the device's cache holds 4096 keys, a
 * new key is not recorded and the call returns RUDA_ERROR_QUOTA (*value
 * still holds the probe's answer). ruda_client_last_error says why.
 * rudad keeps the answers in its cache directory, so they outlive a
 * restart (as CubeCL keeps them on disk).
 */
ruda_status ruda_client_measure_throughput(ruda_client *client, const char *key,
					   int (*probe)(void *user, double *value), void *user,
					   double *value);

/* ---- introspection ---------------------------------------------------- */

typedef struct ruda_daemon_stats {
	uint32_t struct_size; /* sizeof(ruda_daemon_stats) (its _INIT sets it) */
	uint32_t sessions;
	uint64_t device_bytes;
	uint64_t device_buffers;
	uint64_t session_bytes;
	uint64_t session_buffers;
	uint64_t submissions_in_flight;
	uint64_t kernels_compiled; /* compilations (cache misses) */
	uint64_t pipelines;
	uint64_t kernel_hits;      /* registrations served without compiling */
	uint64_t compile_time_us;
	uint64_t modules;          /* distinct SPIR-V modules held */
	uint64_t cache_file_bytes; /* pipeline cache on disk */
	uint64_t session_gpu_time_ns; /* device time of this client's work */
	uint64_t session_launches;
} ruda_daemon_stats;
#define RUDA_DAEMON_STATS_INIT {.struct_size = sizeof(ruda_daemon_stats)}

/* Counters of the daemon and of this session. */
ruda_status ruda_client_daemon_stats(ruda_client *client, ruda_daemon_stats *out);

/* ---- several devices and collectives ------------------------------------ */

/*
 * rudad may open several devices (or one device several times, as separate
 * logical devices); a client uses the one it named at connect. These calls
 * answer from the list the daemon sent at connect, without a round trip.
 */

/* This client's device (ErasedClient::device_id). */
ruda_device_id ruda_client_device_id(const ruda_client *client);
/* Up to `max` ids of the daemon's devices of type `type_id`, in index
 * order, into `out` (may be NULL); returns how many there are
 * (ErasedClient::enumerate_devices). */
size_t ruda_client_enumerate_devices(const ruda_client *client, uint16_t type_id,
				     ruda_device_id *out, size_t max);
/* Every device of the daemon, in the daemon's order
 * (ErasedClient::enumerate_all_devices). */
size_t ruda_client_enumerate_all_devices(const ruda_client *client, ruda_device_id *out,
					 size_t max);
size_t ruda_client_device_count(const ruda_client *client, uint16_t type_id);
size_t ruda_client_device_count_total(const ruda_client *client);
/* The properties of the daemon's device `id` (any device, not only this
 * client's); RUDA_ERROR_INVALID_ARGUMENT when there is none. */
ruda_status ruda_client_device_properties(const ruda_client *client, ruda_device_id id,
					  ruda_device_properties *out);

/* The features of this client's device (ErasedClient::features). */
ruda_status ruda_client_features(const ruda_client *client, ruda_features *out);
/*
 * This client's own copy of its device's properties, to edit
 * (ErasedClient::properties_mut): what ruda_client_properties and
 * ruda_client_features return afterwards. The daemon is not told. Not to be
 * used while other threads read properties of the same client.
 */
ruda_device_properties *ruda_client_properties_mut(ruda_client *client);
/* A 64-bit checksum of the device's properties as the daemon reported
 * them (ErasedClient::properties_fingerprint): equal for equal devices. */
uint64_t ruda_client_properties_fingerprint(const ruda_client *client);

/* What a kernel compiler targets (ErasedClient::target_properties). */
typedef struct ruda_target_properties {
	uint32_t struct_size; /* sizeof(ruda_target_properties) (its _INIT sets it) */
	uint32_t spirv_version;     /* 0x00MMmm00 */
	uint32_t subgroup_size;     /* default */
	uint32_t min_subgroup_size, max_subgroup_size;
	uint32_t max_workgroup_invocations;
	uint32_t max_shared_memory;
	uint32_t min_storage_buffer_offset_alignment;
	uint32_t max_bindings;
	uint32_t max_push_constants_size;
	uint32_t coop_matrix_count; /* shapes in ruda_features */
} ruda_target_properties;
#define RUDA_TARGET_PROPERTIES_INIT {.struct_size = sizeof(ruda_target_properties)}

ruda_status ruda_client_target_properties(const ruda_client *client,
					  ruda_target_properties *out);

/* Vector widths (elements) that make memory access efficient for
 * `elem_size`-byte elements, widest first, into `out` (up to max); returns
 * how many (ErasedClient::io_optimized_vector_sizes). Vulkan vectors have at
 * most 4 components and one access moves at most 16 bytes, so: 4, 2, 1 for
 * elements of 1 to 4 bytes, 2, 1 for 8 bytes, 1 for 16; 0 for a NULL client
 * or another size. */
size_t ruda_client_io_optimized_vector_sizes(const ruda_client *client, size_t elem_size,
					     uint32_t *out, size_t max);

/* How busy this client's device is (ErasedClient::utilization). rudad
 * measures the device time of every submission on each queue. */
typedef struct ruda_device_utilization {
	uint32_t struct_size; /* sizeof(ruda_device_utilization) (its _INIT sets it) */
	double recent;       /* busy fraction (0..1) over the last window */
	uint64_t window_ns;  /* that window's length */
	uint64_t busy_ns;    /* device time since rudad opened the device */
	uint64_t uptime_ns;  /* time since then */
	uint64_t inflight;   /* submissions queued now */
	uint64_t bytes;      /* device memory held by buffers, all clients */
	uint32_t heap_count; /* heaps with figures below; 0 without VK_EXT_memory_budget */
	uint64_t heap_usage[RUDA_MAX_HEAPS];
	uint64_t heap_budget[RUDA_MAX_HEAPS];
} ruda_device_utilization;
#define RUDA_DEVICE_UTILIZATION_INIT {.struct_size = sizeof(ruda_device_utilization)}

ruda_status ruda_client_utilization(ruda_client *client, ruda_device_utilization *out);

/* Whether devices exchange data inside rudad (to_client, collectives):
 * always 1 (ErasedClient::has_device_transport). */
int ruda_client_has_device_transport(const ruda_client *client);

/*
 * Move a buffer to another client of the same process (possibly on another
 * device): `*out` is a new buffer of `dst`, holding src's bytes once the
 * call returns (ErasedClient::to_client). The bytes travel inside rudad
 * (device -> daemon memory -> device, or one device copy when both clients
 * use the same device), never through this process. Waits for the copy.
 * `dtype` is the element type, for the record. RUDA_ERROR_PERMISSION when
 * `dst` belongs to another process.
 */
ruda_status ruda_client_to_client(ruda_client *client, ruda_handle src, ruda_client *dst,
				  ruda_elem_type dtype, ruda_handle *out);
/* The same for a strided tensor (ErasedClient::to_client_tensor): `rank`
 * dimensions of `shape` and `strides` (in elements of `elem_size` bytes,
 * from src.offset); the new buffer holds it packed (row-major). */
ruda_status ruda_client_to_client_tensor(ruda_client *client, ruda_handle src,
					 const uint64_t *shape, const uint64_t *strides,
					 size_t rank, size_t elem_size, ruda_client *dst,
					 ruda_elem_type dtype, ruda_handle *out);

/* ruda_reduce_op (RUDA_REDUCE_*) is in <ruda/common.h>. */

/* Check that collectives over `devices` can run from this client
 * (ErasedClient::ensure_init_collective): they exist, are distinct and
 * include this client's device. */
ruda_status ruda_client_ensure_init_collective(ruda_client *client, const ruda_device_id *devices,
					       size_t count);
/*
 * All-reduce (ErasedClient::all_reduce): one client per device of
 * `devices` makes this call, in the same order as the others; once all
 * have, each one's `dst` holds the element-wise `op` of every `src`
 * (src.size bytes of `dtype`: f32, i32, u32 or f16; mean of integers
 * truncates). Queued, no wait: ruda_client_sync_collective reports the
 * outcome, and dst must not be used before it has returned. Calls that do
 * not match (sizes, types, operations, device sets) fail for every
 * participant, as does a participant that disconnects.
 */
ruda_status ruda_client_all_reduce(ruda_client *client, ruda_handle src, ruda_handle dst,
				   ruda_elem_type dtype, const ruda_device_id *devices,
				   size_t count, ruda_reduce_op op);
/* Wait for every collective this client joined; return (and clear) the
 * first error (ErasedClient::sync_collective). */
ruda_status ruda_client_sync_collective(ruda_client *client);

#ifdef __cplusplus
}
#endif

#endif
