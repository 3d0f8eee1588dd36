/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs transport's part of a request. */
#ifndef CRUXN_VX_REQ_H
#define CRUXN_VX_REQ_H

#include <stdbool.h>
#include <stdint.h>

struct cruxn_vx_req {
	int pending; /* signaled work requests not yet completed (send) */
	unsigned char
	    parts[8]; /* receive: parts of each slot's message arrived (one per QP used) */
	bool flush;   /* a flush's READ (receive side) */
	uint32_t row; /* the FIFO row (absolute) the message took / the receive filled */
	int slot;     /* send: the slot of that row */
	int ntmp;
	void *tmp[8]; /* registrations made for this request only (buffers NCCL did not register) */
};

#endif /* CRUXN_VX_REQ_H */
