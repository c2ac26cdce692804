#include <ruda/ruda.h>

const char *ruda_strerror(ruda_status status)
{
	switch (status) {
	case RUDA_OK: return "success";
	case RUDA_ERROR_INVALID_ARGUMENT: return "invalid argument";
	case RUDA_ERROR_INVALID_HANDLE: return "no such buffer or kernel in this session";
	case RUDA_ERROR_OUT_OF_MEMORY: return "out of device memory";
	case RUDA_ERROR_TOO_LARGE: return "larger than the device allows";
	case RUDA_ERROR_QUOTA: return "over the memory quota";
	case RUDA_ERROR_UNSUPPORTED: return "not supported";
	case RUDA_ERROR_PROTOCOL: return "protocol error";
	case RUDA_ERROR_INVALID_KERNEL: return "kernel refused";
	case RUDA_ERROR_DEVICE_LOST: return "device lost";
	case RUDA_ERROR_TIMEOUT: return "timed out";
	case RUDA_ERROR_DISCONNECTED: return "disconnected from rudad";
	case RUDA_ERROR_OUT_OF_RANGE: return "offset or size out of range";
	case RUDA_ERROR_VERSION: return "protocol version mismatch";
	case RUDA_ERROR_PERMISSION: return "permission denied";
	case RUDA_ERROR_BUSY: return "a daemon limit is reached";
	case RUDA_ERROR_INTERNAL: return "internal error in rudad";
	case RUDA_ERROR_IO: return "input/output error";
	case RUDA_ERROR_LEASE_EXPIRED: return "the exclusive lease expired";
	}
	return "unknown status";
}
