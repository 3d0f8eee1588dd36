/* SPDX-License-Identifier: Apache-2.0 */
/* The socket transport's message header and its part of a request. */
#ifndef CRUXN_SOCK_REQ_H
#define CRUXN_SOCK_REQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cruxn_msg_type {
	CRUXN_MSG_INLINE = 1,  /* payload follows on the control socket */
	CRUXN_MSG_STRIPED = 2, /* payload on the data sockets of set 'epoch' */
	CRUXN_MSG_ACCEPT = 3,  /* receiver -> sender: size = data listener port */
};

struct cruxn_msg {
	uint32_t magic;
	uint16_t type;
	uint8_t level;
	uint8_t tos;
	int32_t prio;
	int32_t tag;
	uint64_t size;
	uint32_t epoch;
	uint32_t seq;
};

struct cruxn_sock_req {
	_Atomic int pending; /* data-socket tasks outstanding */
	/* send: header + inline payload progress on the control socket */
	struct cruxn_msg hdr;
	size_t hdr_off;
	size_t inline_off;
	size_t inline_len; /* receive: inline slots still being read */
	bool ctrl_done;
};

#endif /* CRUXN_SOCK_REQ_H */
