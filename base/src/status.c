/* SPDX-License-Identifier: Apache-2.0 */
#include "crux/status.h"

const char *crux_status_str(crux_status_t status)
{
	switch (status) {
	case CRUX_OK:
		return "ok";
	case CRUX_ERR_INVAL:
		return "invalid argument";
	case CRUX_ERR_NOMEM:
		return "out of memory";
	case CRUX_ERR_IO:
		return "input/output error";
	case CRUX_ERR_NOENT:
		return "not found";
	case CRUX_ERR_BUSY:
		return "busy";
	case CRUX_ERR_CORRUPT:
		return "corrupt record";
	case CRUX_ERR_VERSION:
		return "unsupported layout version";
	case CRUX_ERR_PERM:
		return "unsafe permissions or file type";
	case CRUX_ERR_STALE:
		return "stale";
	case CRUX_ERR_EXIST:
		return "already exists";
	case CRUX_ERR_RANGE:
		return "out of range";
	case CRUX_ERR_UNSUPPORTED:
		return "not supported";
	case CRUX_ERR_REMOTE:
		return "remote failure";
	case CRUX_ERR_TIMEOUT:
		return "timed out";
	}
	return "unknown status";
}
