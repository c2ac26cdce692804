/* rudactl metrics: the daemon's counters in the Prometheus text exposition
 * format (version 0.0.4), for a node exporter's textfile collector or a
 * scrape wrapper. Names start with ruda_; counters end in _total. */
#include "rudactl.h"

#include <inttypes.h>
#include <string.h>

/* A label value with \, " and newlines escaped. */
static void label_value(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(out, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void device_labels(FILE *out, uint32_t device)
{
	fprintf(out, "{device=\"%u\"}", device);
}

static void client_labels(FILE *out, const Ruda__AdminClient *c)
{
	fprintf(out, "{client=\"%" PRIu64 "\",name=\"", c->id);
	label_value(out, c->name);
	fprintf(out, "\",uid=\"%u\",device=\"", c->uid);
	if (c->has_device)
		fprintf(out, "%u", c->device);
	fputs("\"}", out);
}

/* One family: its HELP and TYPE, then a sample per element of `list` (`n`
 * of them), the element declared by `decl` for `labels` and `value`. */
#define FAMILY_EACH(name, type, help, decl, list, n, labels, fmt, value)              \
	do {                                                                          \
		family(out, name, type, help);                                        \
		for (size_t i = 0; i < (n); i++) {                                    \
			decl = (list)[i];                                             \
			fputs(name, out);                                             \
			labels;                                                       \
			fprintf(out, " " fmt "\n", value);                            \
		}                                                                     \
	} while (0)

/* One value per device of the status reply (d), the memory reply (m), the
 * cache reply (m); per client (c), and a client's nanoseconds in seconds. */
#define DEVICE_FAMILY(name, type, help, expr)                                         \
	FAMILY_EACH(name, type, help, const Ruda__AdminDevice *d, s->devices, s->n_devices, \
		    device_labels(out, d->index), "%" PRIu64, (uint64_t)(expr))
#define MEMORY_FAMILY(name, type, help, expr)                                         \
	FAMILY_EACH(name, type, help, const Ruda__AdminMemoryDevice *m, snap.memory->devices, \
		    snap.memory->n_devices, device_labels(out, m->index), "%" PRIu64, \
		    (uint64_t)(expr))
#define CACHE_FAMILY(name, type, help, expr)                                          \
	FAMILY_EACH(name, type, help, const Ruda__AdminCacheDevice *m, snap.cache->devices, \
		    snap.cache->n_devices, device_labels(out, m->index), "%" PRIu64,  \
		    (uint64_t)(expr))
#define CLIENT_FAMILY(name, type, help, expr)                                         \
	FAMILY_EACH(name, type, help, const Ruda__AdminClient *c, snap.clients, snap.nclients, \
		    client_labels(out, c), "%" PRIu64, (uint64_t)(expr))
#define CLIENT_SECONDS(name, type, help, ns)                                          \
	FAMILY_EACH(name, type, help, const Ruda__AdminClient *c, snap.clients, snap.nclients, \
		    client_labels(out, c), "%.9f", (double)(ns) / 1e9)

int ctl_metrics(struct ctl *ctl, FILE *out)
{
	struct snapshot snap;
	int rc = snapshot_take(ctl, &snap, SNAP_CLIENTS | SNAP_CACHE | SNAP_MEMORY);
	if (rc) {
		snapshot_free(&snap);
		return rc;
	}
	const Ruda__AdminStatusReply *s = snap.status;

	family(out, "ruda_info", "gauge", "rudad's version and protocol (always 1).");
	fputs("ruda_info{version=\"", out);
	label_value(out, s->daemon_version);
	fprintf(out, "\",protocol=\"%u\"} 1\n", s->protocol_version);
	family(out, "ruda_uptime_seconds", "gauge", "Seconds since rudad started.");
	fprintf(out, "ruda_uptime_seconds %.3f\n", (double)s->uptime_ms / 1000.0);
	family(out, "ruda_clients", "gauge", "Clients connected.");
	fprintf(out, "ruda_clients %u\n", s->sessions);
	family(out, "ruda_draining", "gauge", "1 while rudad accepts no new clients.");
	fprintf(out, "ruda_draining %d\n", s->draining ? 1 : 0);
	family(out, "ruda_staging_bytes", "gauge",
	       "Host bytes of every client's staging regions (charged to the staging quotas).");
	fprintf(out, "ruda_staging_bytes %" PRIu64 "\n", s->staging_bytes);
	family(out, "ruda_staging_regions", "gauge", "Staging regions of every client.");
	fprintf(out, "ruda_staging_regions %u\n", s->staging_regions);
	family(out, "ruda_loop_slow_passes_total", "counter",
	       "Passes of rudad's loop that kept every client waiting 50 ms or more (its log "
	       "says where their time went).");
	fprintf(out, "ruda_loop_slow_passes_total %" PRIu64 "\n", s->slow_passes);
	family(out, "ruda_loop_longest_pass_seconds", "gauge",
	       "The longest pass of rudad's loop since it started, without its wait for events.");
	fprintf(out, "ruda_loop_longest_pass_seconds %.6f\n", (double)s->longest_pass_ns / 1e9);

	family(out, "ruda_device_info", "gauge", "A device of rudad (always 1).");
	for (size_t i = 0; i < s->n_devices; i++) {
		const Ruda__AdminDevice *d = s->devices[i];
		char v[32];
		fprintf(out, "ruda_device_info{device=\"%u\",name=\"", d->index);
		label_value(out, d->name);
		fprintf(out, "\",type=\"%s\",api_version=\"%s\"} 1\n", d->type,
			fmt_vk_version(v, sizeof(v), d->api_version));
	}
	family(out, "ruda_device_heap_bytes", "gauge", "Size of a device memory heap.");
	for (size_t i = 0; i < s->n_devices; i++)
		for (size_t k = 0; k < s->devices[i]->n_heaps; k++) {
			const Ruda__AdminHeap *h = s->devices[i]->heaps[k];
			fprintf(out,
				"ruda_device_heap_bytes{device=\"%u\",heap=\"%u\",device_local=\"%s\"} "
				"%" PRIu64 "\n",
				s->devices[i]->index, h->index, h->device_local ? "true" : "false",
				h->size);
		}
	DEVICE_FAMILY("ruda_device_clients", "gauge", "Clients using the device.", d->clients);
	DEVICE_FAMILY("ruda_device_buffer_bytes", "gauge", "Device memory held by buffers.",
		      d->buffer_bytes);
	DEVICE_FAMILY("ruda_device_buffers", "gauge", "Buffers allocated.", d->buffers);
	DEVICE_FAMILY("ruda_device_arena_bytes", "gauge",
		      "Clients' shared-memory arenas (host pages).", d->arena_bytes);
	DEVICE_FAMILY("ruda_device_arena_imported_bytes", "gauge",
		      "Arenas imported by the device (pinned; made at a client's first "
		      "transfer), or given a bounce buffer without host import.",
		      d->arena_imported_bytes);
	DEVICE_FAMILY("ruda_device_arenas_imported", "gauge", "Arenas imported by the device.",
		      d->arenas_imported);
	DEVICE_FAMILY("ruda_device_inflight_submissions", "gauge",
		      "Submissions queued on the device and not completed.", d->inflight);
	DEVICE_FAMILY("ruda_device_submissions_total", "counter", "Submissions completed.",
		      d->completed);
	DEVICE_FAMILY("ruda_device_lost", "gauge", "1 once the device has failed.", d->lost);
	DEVICE_FAMILY("ruda_device_pipelines", "gauge", "Compiled pipelines alive.",
		      d->pipelines);

	MEMORY_FAMILY("ruda_device_memory_reserved_bytes", "gauge",
		      "Device memory held in the allocator's pages.", m->reserved_bytes);
	MEMORY_FAMILY("ruda_device_memory_free_bytes", "gauge",
		      "Reserved device memory handed to no buffer.", m->free_bytes);
	MEMORY_FAMILY("ruda_device_memory_pages", "gauge", "Memory pages held.", m->pages);
	MEMORY_FAMILY("ruda_device_memory_empty_pages", "gauge",
		      "Shared pages holding nothing (cleanup frees them).", m->empty_pages);
	MEMORY_FAMILY("ruda_device_zero_filled_bytes_total", "counter",
		      "New buffers' bytes zero-filled since rudad started.", m->zero_filled_bytes);
	MEMORY_FAMILY("ruda_device_memory_kept_bytes", "gauge",
		      "Freed buffers' own pages kept for the next buffer of their size.",
		      m->kept_bytes);

	CACHE_FAMILY("ruda_pipeline_cache_entries", "gauge", "Pipelines the registry holds.",
		     m->entries);
	CACHE_FAMILY("ruda_pipeline_cache_unused", "gauge",
		     "Pipelines no client uses, kept for later ones.", m->unused);
	CACHE_FAMILY("ruda_pipeline_cache_hits_total", "counter",
		     "Kernel registrations served by an existing pipeline.", m->hits);
	CACHE_FAMILY("ruda_pipeline_cache_misses_total", "counter",
		     "Kernel registrations that started a compilation.",
		     m->compiled + m->compiling);
	family(out, "ruda_pipeline_compile_seconds_total", "counter",
	       "Time spent compiling pipelines.");
	for (size_t i = 0; i < snap.cache->n_devices; i++)
		fprintf(out, "ruda_pipeline_compile_seconds_total{device=\"%u\"} %.9f\n",
			snap.cache->devices[i]->index,
			(double)snap.cache->devices[i]->compile_ns / 1e9);

	CLIENT_FAMILY("ruda_client_buffer_bytes", "gauge", "Device memory of the client's buffers.",
		      c->bytes);
	CLIENT_FAMILY("ruda_client_buffers", "gauge", "Buffers the client holds.", c->buffers);
	CLIENT_FAMILY("ruda_client_kernels", "gauge", "Kernels the client holds.", c->kernels);
	CLIENT_FAMILY("ruda_client_arena_bytes", "gauge", "Size of the client's arena.",
		      c->arena_size);
	family(out, "ruda_client_quota_bytes", "gauge",
	       "The client's device memory quota (clients with one only).");
	for (size_t i = 0; i < snap.nclients; i++)
		if (snap.clients[i]->quota_bytes) {
			fputs("ruda_client_quota_bytes", out);
			client_labels(out, snap.clients[i]);
			fprintf(out, " %" PRIu64 "\n", snap.clients[i]->quota_bytes);
		}
	CLIENT_FAMILY("ruda_client_staging_bytes", "gauge",
		      "Host bytes of the client's staging regions.", c->staging_bytes);
	CLIENT_FAMILY("ruda_client_staging_regions", "gauge", "Staging regions the client holds.",
		      c->staging_regions);
	CLIENT_FAMILY("ruda_client_submissions_total", "counter",
		      "GPU submissions made for the client.", c->submissions);
	CLIENT_FAMILY("ruda_client_inflight_submissions", "gauge",
		      "The client's submissions not yet completed.", c->inflight);
	CLIENT_FAMILY("ruda_client_requests_total", "counter", "Requests the client sent.",
		      c->requests);
	CLIENT_FAMILY("ruda_client_launches_total", "counter", "Kernel launches of the client.",
		      c->launches);
	CLIENT_FAMILY("ruda_client_uploaded_bytes_total", "counter",
		      "Bytes the client wrote into device buffers.", c->bytes_uploaded);
	CLIENT_FAMILY("ruda_client_downloaded_bytes_total", "counter",
		      "Bytes the client read from device buffers.", c->bytes_downloaded);
	CLIENT_FAMILY("ruda_client_kernels_registered_total", "counter",
		      "Kernels the client registered.", c->kernels_registered);
	CLIENT_SECONDS("ruda_client_gpu_seconds_total", "counter",
		       "Device time of the client's work.", c->gpu_time_ns);
	CLIENT_SECONDS("ruda_client_connected_seconds", "gauge",
		       "Seconds since the client connected.", c->age_ms * 1000000ull);
	CLIENT_SECONDS("ruda_client_idle_seconds", "gauge",
		       "Seconds since the client's last request.", c->idle_ms * 1000000ull);
	snapshot_free(&snap);
	return CTL_EXIT_OK;
}
