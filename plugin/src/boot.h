/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap channel both transports share: the interfaces NCCL's
 * bootstrap may use (devices.c), the listener's handle published through
 * NCCL, the greetings a listener reads from new connections, and the
 * non-blocking pumps that move bytes on these sockets. The socket
 * transport carries its data on such sockets too; the verbs transport uses
 * one per connection for set-up and lane control.
 */
#ifndef CRUXN_BOOT_H
#define CRUXN_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "crux/addr.h"
#include "crux/status.h"
#include "cruxn.h"

/*
 * What a listener publishes through NCCL's bootstrap (<= 128 bytes). The
 * magic and version are the transport's, so a handle of one transport is
 * refused by the other.
 */
struct cruxn_boot_handle {
	uint32_t magic;
	uint16_t version;
	uint16_t family; /* AF_INET / AF_INET6 */
	uint8_t addr[16];
	uint16_t port; /* network order */
	uint16_t pad;
	uint32_t scope_id;
	uint64_t nonce;		/* the listener's */
	uint64_t connect_state; /* sender's in-progress state; 0 from the listener */
};
_Static_assert(sizeof(struct cruxn_boot_handle) <= CRUXN_NET_HANDLE_MAXSIZE,
	       "the handle must fit NCCL's");

/* Bootstrap interfaces (the socket scan of init): how many, and the i-th. */
int cruxn_boot_nifs(void);
const struct cruxn_dev *cruxn_boot_if(int i);

/*
 * A listening socket on interface 'ifc' and its handle (the whole
 * CRUXN_NET_HANDLE_MAXSIZE bytes are written). *fd is non-blocking.
 */
crux_status_t cruxn_boot_listen(const struct cruxn_dev *ifc, uint32_t magic, uint16_t version,
				uint64_t nonce, void *handle, int *fd);

/* The listener's address in a handle of (magic, version); CRUX_ERR_INVAL when not one. */
crux_status_t cruxn_boot_handle_peer(const void *handle, uint32_t magic, uint16_t version,
				     union crux_sockaddr *peer, socklen_t *len);

/*
 * A non-blocking TCP connection to 'peer' (its port replaced by 'dport'
 * when non-zero) from interface 'ifc', bound to source port 'sport' when
 * non-zero (shared, SO_REUSEPORT), tuned (no Nagle, bounded timeouts).
 */
crux_status_t cruxn_boot_connect(const struct cruxn_dev *ifc, const struct sockaddr *peer,
				 socklen_t plen, uint16_t dport, uint16_t sport, int *fd);

/* ---- pumps (never block) ---- */

#define CRUXN_BOOT_EOF (-1)

/* Write what the socket takes now. Returns 0 (maybe incomplete) or an errno. */
int cruxn_boot_write_some(int fd, const void *buf, size_t len, size_t *off);
/* Read what is there now. Returns 0 (maybe incomplete), CRUXN_BOOT_EOF, or an errno. */
int cruxn_boot_read_some(int fd, void *buf, size_t len, size_t *off);
/* Non-blocking connect finished? 0 with *done set, or the connect error. */
int cruxn_boot_connect_poll(int fd, bool *done);
/* Shut our sending side, discard what is readable (bounded), close. */
void cruxn_boot_close_gracefully(int fd);

/* ---- greetings: the first bytes of every connection a listener accepts ---- */

#define CRUXN_BOOT_PEND	     17	 /* connections greeting at once per listener */
#define CRUXN_BOOT_HELLO_MAX 256 /* bytes of one greeting */

struct cruxn_boot_greeter {
	size_t hello_len;
	int n;
	int fd[CRUXN_BOOT_PEND];
	size_t off[CRUXN_BOOT_PEND];
	uint64_t since[CRUXN_BOOT_PEND];
	_Alignas(8) unsigned char hello[CRUXN_BOOT_PEND][CRUXN_BOOT_HELLO_MAX];
};

enum cruxn_boot_verdict {
	CRUXN_BOOT_TAKE,   /* the connection is the caller's now */
	CRUXN_BOOT_REJECT, /* not a greeting this listener serves: closed */
	CRUXN_BOOT_WAIT,   /* keep it (with its greeting) for a later pump */
};

void cruxn_boot_greeter_init(struct cruxn_boot_greeter *g, size_t hello_len);
/* Close every connection still greeting. */
void cruxn_boot_greeter_close(struct cruxn_boot_greeter *g);

/*
 * Accept what the listener has (the oldest greeting connection makes room
 * when all CRUXN_BOOT_PEND are taken), read greetings, and hand each
 * complete one to judge(arg, fd, hello). A connection that ends or fails
 * before greeting is closed. Returns 0, or the errno of a failed accept.
 */
int cruxn_boot_greet(struct cruxn_boot_greeter *g, int listen_fd,
		     enum cruxn_boot_verdict (*judge)(void *arg, int fd, const void *hello),
		     void *arg);

#endif /* CRUXN_BOOT_H */
