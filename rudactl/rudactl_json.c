/* rudactl --json: a small streaming JSON writer and the objects of the
 * schema documented in docs/rudactl.md. Field names here are a stable
 * interface: add fields, never rename or remove them without raising
 * CTL_JSON_SCHEMA. */
#include "rudactl.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static void indent(struct json *j)
{
	fputc('\n', j->out);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->out);
}

/* Length of the valid UTF-8 sequence at `s`, or 0. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static void write_string(FILE *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	fputc('"', out);
	while (*s) {
		if (*s == '"' || *s == '\\') {
			fputc('\\', out);
			fputc(*s++, out);
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(out, "\\u%04x", *s++);
		} else {
			size_t n = utf8_len(s);
			if (n == 0) {
				fputs("\\ufffd", out); /* not UTF-8: replaced */
				s++;
			} else {
				fwrite(s, 1, n, out);
				s += n;
			}
		}
	}
	fputc('"', out);
}

/* Comma, newline, indentation and the key of the next value. */
static void member(struct json *j, const char *key)
{
	if (!j->first[j->depth])
		fputc(',', j->out);
	j->first[j->depth] = false;
	indent(j);
	if (key) {
		write_string(j->out, key);
		fputs(": ", j->out);
	}
}

static void open_container(struct json *j, const char *key, char bracket)
{
	member(j, key);
	fputc(bracket, j->out);
	if (j->depth + 1 < (int)(sizeof(j->first) / sizeof(j->first[0])))
		j->depth++;
	j->first[j->depth] = true;
}

static void close_container(struct json *j, char bracket)
{
	bool empty = j->first[j->depth];
	j->depth--;
	if (!empty)
		indent(j);
	fputc(bracket, j->out);
}

void json_object(struct json *j, const char *key)
{
	open_container(j, key, '{');
}

void json_object_end(struct json *j)
{
	close_container(j, '}');
}

void json_array(struct json *j, const char *key)
{
	open_container(j, key, '[');
}

void json_array_end(struct json *j)
{
	close_container(j, ']');
}

void json_str(struct json *j, const char *key, const char *value)
{
	member(j, key);
	if (value)
		write_string(j->out, value);
	else
		fputs("null", j->out);
}

void json_u64(struct json *j, const char *key, uint64_t value)
{
	member(j, key);
	fprintf(j->out, "%" PRIu64, value);
}

void json_i64(struct json *j, const char *key, int64_t value)
{
	member(j, key);
	fprintf(j->out, "%" PRId64, value);
}

void json_bool(struct json *j, const char *key, bool value)
{
	member(j, key);
	fputs(value ? "true" : "false", j->out);
}

void json_null(struct json *j, const char *key)
{
	member(j, key);
	fputs("null", j->out);
}

void json_u64_or_null(struct json *j, const char *key, bool present, uint64_t value)
{
	if (present)
		json_u64(j, key, value);
	else
		json_null(j, key);
}

void json_quota(struct json *j, const char *key, uint64_t bytes)
{
	json_u64_or_null(j, key, bytes != 0, bytes);
}

void json_double(struct json *j, const char *key, double value, int decimals)
{
	member(j, key);
	if (isfinite(value))
		fprintf(j->out, "%.*f", decimals, value);
	else
		fputs("null", j->out);
}

void json_begin(struct json *j, FILE *out, const char *command)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	fputc('{', out);
	j->depth = 1;
	j->first[1] = true;
	json_u64(j, "schema_version", CTL_JSON_SCHEMA);
	json_str(j, "command", command);
}

void json_end(struct json *j)
{
	close_container(j, '}');
	fputc('\n', j->out);
}

/* ---- the schema's objects ------------------------------------------------ */

static void json_heaps(struct json *j, Ruda__AdminHeap *const *heaps, size_t n)
{
	json_array(j, "heaps");
	for (size_t i = 0; i < n; i++) {
		json_object(j, NULL);
		json_u64(j, "index", heaps[i]->index);
		json_u64(j, "size_bytes", heaps[i]->size);
		json_bool(j, "device_local", heaps[i]->device_local);
		json_object_end(j);
	}
	json_array_end(j);
}

static void json_u32_array(struct json *j, const char *key, const uint32_t *v, size_t n)
{
	json_array(j, key);
	for (size_t i = 0; i < n; i++)
		json_u64(j, NULL, v[i]);
	json_array_end(j);
}

void json_daemon(struct json *j, const Ruda__AdminStatusReply *s)
{
	json_object(j, "daemon");
	json_str(j, "version", s->daemon_version);
	json_u64(j, "protocol_version", s->protocol_version);
	json_i64(j, "pid", s->pid);
	json_u64(j, "uptime_ms", s->uptime_ms);
	json_str(j, "socket", s->socket);
	json_u64(j, "clients", s->sessions);
	json_bool(j, "draining", s->draining);
	json_bool(j, "admin", s->admin);
	json_u64(j, "staging_bytes", s->staging_bytes);
	json_u64(j, "staging_regions", s->staging_regions);
	json_u64(j, "staging_importing", s->staging_importing);
	json_u64(j, "peer_window_bytes", s->peer_window_bytes);
	json_u64(j, "peer_windows", s->peer_windows);
	json_u64(j, "loop_busy_ns", s->loop_busy_ns);
	json_u64(j, "turns_yielded", s->turns_yielded);
	json_u64(j, "completions_between_turns", s->completions_between_turns);
	json_u64(j, "syncs_submitted_early", s->syncs_submitted_early);
	json_u64(j, "turns_ns", s->turns_ns);
	json_u64(j, "longest_pass_ns", s->longest_pass_ns);
	json_u64(j, "slow_passes", s->slow_passes);
	json_object(j, "limits");
	json_u64(j, "arena_bytes", s->arena_size);
	json_u64(j, "min_client_arena_bytes", s->min_arena_size);
	json_u64(j, "max_client_arena_bytes", s->max_arena_size);
	json_u64(j, "max_buffers", s->max_buffers);
	json_u64(j, "max_unread_reply_bytes", s->max_output);
	json_object_end(j);
	json_object_end(j);
}

void json_device(struct json *j, const Ruda__AdminDevice *d, double busy)
{
	char v[32], uuid[40];
	json_object(j, NULL);
	json_u64(j, "index", d->index);
	json_str(j, "name", d->name);
	json_str(j, "type", d->type);
	json_u64(j, "vendor_id", d->vendor_id);
	json_u64(j, "device_id", d->device_id);
	json_str(j, "api_version", fmt_vk_version(v, sizeof(v), d->api_version));
	json_u64(j, "driver_version", d->driver_version);
	json_str(j, "pipeline_cache_uuid",
		 fmt_hex(uuid, sizeof(uuid), d->pipeline_cache_uuid.data, d->pipeline_cache_uuid.len));
	json_bool(j, "host_import", d->host_import);
	json_object(j, "limits");
	json_u64(j, "max_buffer_bytes", d->max_buffer_size);
	json_u64(j, "max_binding_bytes", d->max_storage_buffer_range);
	json_u64(j, "max_push_constant_bytes", d->max_push_constants_size);
	json_u64(j, "max_bindings", d->max_bindings);
	json_u32_array(j, "max_workgroup_count", d->max_workgroup_count, d->n_max_workgroup_count);
	json_u32_array(j, "max_workgroup_size", d->max_workgroup_size, d->n_max_workgroup_size);
	json_u64(j, "max_workgroup_invocations", d->max_workgroup_invocations);
	json_u64(j, "subgroup_size", d->subgroup_size);
	json_object_end(j);
	json_heaps(j, d->heaps, d->n_heaps);
	json_u64(j, "clients", d->clients);
	json_u64(j, "buffer_bytes", d->buffer_bytes);
	json_u64(j, "buffers", d->buffers);
	json_u64(j, "arena_bytes", d->arena_bytes);
	json_u64(j, "arenas", d->arenas);
	json_u64(j, "arena_imported_bytes", d->arena_imported_bytes);
	json_u64(j, "arenas_imported", d->arenas_imported);
	json_u64(j, "inflight_submissions", d->inflight);
	json_u64(j, "submitted", d->submitted);
	json_u64(j, "completed", d->completed);
	json_bool(j, "lost", d->lost);
	json_u64(j, "pipelines", d->pipelines);
	json_u64(j, "kernels_compiled", d->kernels_compiled);
	json_u64(j, "gpu_time_ns", d->gpu_time_ns);
	json_u64(j, "physical_index", d->physical_index);
	json_u64(j, "type_index", d->type_index);
	json_u64(j, "busy_ns", d->busy_ns);
	json_u64(j, "peer_copy_bytes", d->peer_copy_bytes);
	json_u64(j, "staged_copy_bytes", d->staged_copy_bytes);
	json_u64(j, "queue_submits", d->queue_submits);
	json_u64(j, "submit_ns", d->submit_ns);
	json_u64(j, "lane_submissions", d->lane_submissions);
	json_u64(j, "lane_rounds", d->lane_rounds);
	json_u64(j, "lane_launches", d->lane_launches);
	json_u64(j, "lane_gpu_ns", d->lane_gpu_ns);
	json_u64(j, "lane_idle_ns", d->lane_idle_ns);
	json_u64(j, "lane_record_ns", d->lane_record_ns);
	json_u64(j, "completion_ns", d->completion_ns);
	if (busy < 0)
		json_null(j, "busy_percent");
	else
		json_double(j, "busy_percent", busy * 100.0, 1);
	json_object_end(j);
}

void json_client(struct json *j, const Ruda__AdminClient *c)
{
	json_object(j, NULL);
	json_u64(j, "id", c->id);
	json_i64(j, "pid", c->pid);
	json_u64(j, "uid", c->uid);
	json_u64(j, "gid", c->gid);
	json_str(j, "name", c->name);
	json_str(j, "state", c->state);
	json_u64_or_null(j, "device", c->has_device, c->device);
	json_u64(j, "age_ms", c->age_ms);
	json_u64(j, "idle_ms", c->idle_ms);
	json_u64(j, "streams", c->streams);
	json_u64(j, "buffers", c->buffers);
	json_u64(j, "bytes", c->bytes);
	json_u64(j, "kernels", c->kernels);
	json_u64(j, "inflight_submissions", c->inflight);
	json_bool(j, "recording", c->recording);
	json_u64(j, "requests", c->requests);
	json_u64(j, "launches", c->launches);
	json_u64(j, "bytes_uploaded", c->bytes_uploaded);
	json_u64(j, "bytes_downloaded", c->bytes_downloaded);
	json_u64(j, "kernels_registered", c->kernels_registered);
	json_u64(j, "gpu_time_ns", c->gpu_time_ns);
	json_u64(j, "priority", c->priority);
	json_bool(j, "arena_imported", c->arena_imported);
	json_bool(j, "client_arena", c->client_arena);
	json_u64(j, "staging_bytes", c->staging_bytes);
	json_u64(j, "staging_regions", c->staging_regions);
	json_u64(j, "submissions", c->submissions);
	json_object(j, "limits");
	json_u64(j, "arena_bytes", c->arena_size);
	json_u64(j, "max_buffers", c->max_buffers);
	json_quota(j, "quota_bytes", c->quota_bytes);
	json_quota(j, "uid_quota_bytes", c->quota_uid_bytes);
	json_quota(j, "staging_quota_bytes", c->staging_quota_bytes);
	json_quota(j, "uid_staging_quota_bytes", c->staging_quota_uid_bytes);
	json_object_end(j);
	json_object_end(j);
}

void json_memory_device(struct json *j, const Ruda__AdminMemoryDevice *m)
{
	json_object(j, NULL);
	json_u64(j, "index", m->index);
	json_str(j, "name", m->name);
	json_heaps(j, m->heaps, m->n_heaps);
	json_u64(j, "buffer_bytes", m->buffer_bytes);
	json_u64(j, "buffers", m->buffers);
	json_u64(j, "arena_bytes", m->arena_bytes);
	json_u64(j, "arenas", m->arenas);
	json_u64(j, "arena_imported_bytes", m->arena_imported_bytes);
	json_u64(j, "arenas_imported", m->arenas_imported);
	json_u64(j, "reserved_bytes", m->reserved_bytes);
	json_u64(j, "free_bytes", m->free_bytes);
	json_u64(j, "pages", m->pages);
	json_u64(j, "empty_pages", m->empty_pages);
	json_u64(j, "page_size_bytes", m->page_size);
	json_u64(j, "max_shared_bytes", m->max_shared);
	json_u64(j, "keep_empty_pages", m->keep_empty);
	json_u64(j, "kept_bytes", m->kept_bytes);
	json_u64(j, "kept_max_bytes", m->kept_max_bytes);
	json_u64(j, "kept_for_ms", m->kept_for_ms);
	json_u64(j, "zero_filled_bytes", m->zero_filled_bytes);
	json_u64(j, "memory_type", m->memory_type);
	json_object_end(j);
}

void json_cache_device(struct json *j, const Ruda__AdminCacheDevice *m)
{
	char hex[72];
	json_object(j, NULL);
	json_u64(j, "device", m->index);
	json_str(j, "name", m->name);
	json_u64(j, "entries", m->entries);
	json_u64(j, "modules", m->modules);
	json_u64(j, "ready", m->ready);
	json_u64(j, "compiling", m->compiling);
	json_u64(j, "unused", m->unused);
	json_u64(j, "compiled", m->compiled);
	json_u64(j, "hits", m->hits);
	json_u64(j, "misses", m->compiled + m->compiling);
	json_u64(j, "compile_time_ns", m->compile_ns);
	json_str(j, "file", *m->file ? m->file : NULL);
	json_u64(j, "file_bytes", m->file_bytes);
	json_u64(j, "pipelines_total", m->pipelines_total);
	json_array(j, "pipelines");
	for (size_t i = 0; i < m->n_pipelines; i++) {
		const Ruda__AdminPipeline *p = m->pipelines[i];
		json_object(j, NULL);
		json_str(j, "module_sha256",
			 fmt_hex(hex, sizeof(hex), p->module_sha256.data, p->module_sha256.len));
		json_str(j, "entry_point", p->entry_point);
		json_u64(j, "spirv_bytes", p->spirv_size);
		json_u64(j, "bindings", p->binding_count);
		json_u64(j, "push_constant_bytes", p->push_constant_size);
		json_u64(j, "spec_constants", p->spec_constants);
		json_str(j, "state", p->state);
		json_u64(j, "references", p->references);
		json_u64(j, "compile_time_ns", p->compile_ns);
		json_object_end(j);
	}
	json_array_end(j);
	json_object_end(j);
}
