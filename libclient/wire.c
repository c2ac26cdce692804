/* The protocol pieces libruda and rudactl share (wire.h). */
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../proto/socket_path.h"

ruda_status ruda__wire_connect(const char *given, const char *no_path, char *path,
			       size_t path_len, int *fd, char *why, size_t why_len)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	size_t max = path_len < sizeof(addr.sun_path) ? path_len : sizeof(addr.sun_path);
	*fd = -1;
	int err = ruda__socket_path(given, path, max);
	if (err == -ENOENT) {
		snprintf(why, why_len, "%s", no_path);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (err < 0) {
		snprintf(why, why_len, "the socket path is too long (at most %zu bytes)", max - 1);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	memcpy(addr.sun_path, path, strlen(path) + 1);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		err = errno;
		if (s >= 0)
			close(s);
		ruda__socket_connect_error(path, err, why, why_len);
		return err == EACCES || err == EPERM ? RUDA_ERROR_PERMISSION
						     : RUDA_ERROR_DISCONNECTED;
	}
	*fd = s;
	return RUDA_OK;
}

ruda_status ruda__wire_queue(struct ruda_frame_writer *out, const Ruda__Request *req,
			     size_t *size)
{
	*size = ruda__request__get_packed_size(req);
	if (*size > RUDA_FRAME_MAX_PAYLOAD)
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint8_t *dst = ruda__frame_writer_reserve(out, (uint32_t)*size);
	if (!dst)
		return RUDA_ERROR_OUT_OF_MEMORY;
	ruda__request__pack(req, dst);
	ruda__frame_writer_commit(out, (uint32_t)*size);
	return RUDA_OK;
}

ssize_t ruda__wire_recv(struct ruda_frame_reader *in, int fd, int timeout_ms)
{
	if (timeout_ms >= 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int n = poll(&p, 1, timeout_ms);
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
	}
	return ruda__frame_reader_recv(in, fd, 0);
}

int ruda__wire_next_reply(struct ruda_frame_reader *in, struct ruda_frame *frame,
			  Ruda__Reply **reply)
{
	int r = ruda__frame_reader_next(in, frame);
	*reply = r > 0 ? ruda__reply__unpack(NULL, frame->length, frame->payload) : NULL;
	return r;
}

void ruda__wire_hello(Ruda__Request *req, Ruda__Hello *hello, const char *client_name)
{
	*hello = (Ruda__Hello)RUDA__HELLO__INIT;
	hello->protocol_version = RUDA_PROTOCOL_VERSION;
	hello->client_name = (char *)client_name;
	*req = (Ruda__Request)RUDA__REQUEST__INIT;
	req->body_case = RUDA__REQUEST__BODY_HELLO;
	req->hello = hello;
}

const Ruda__HelloReply *ruda__wire_hello_reply(const Ruda__Reply *reply)
{
	if (!reply || reply->body_case != RUDA__REPLY__BODY_HELLO ||
	    reply->hello->device_index >= reply->hello->n_devices)
		return NULL;
	return reply->hello;
}
