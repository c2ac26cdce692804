#include "admin.h"

#include "session.h"

void ruda__admin_handle(struct ruda_session *s, const Ruda__Request *req)
{
	ruda__session_reply_status(s, req->id, RUDA_ERROR_UNSUPPORTED,
				   "admin requests are not implemented yet");
}
