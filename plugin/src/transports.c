/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transports built into this plugin, in CRUX_TRANSPORT=auto's order:
 * verbs first when rdma-core's headers were there at build time (NCCL
 * prefers IB too), then the socket transport, which always starts.
 */
#include "core.h"

#ifdef CRUXN_HAVE_VERBS
extern const struct cruxn_transport_ops cruxn_verbs_ops;
#endif
extern const struct cruxn_transport_ops cruxn_socket_ops;

const struct cruxn_transport_ops *const cruxn_transports[] = {
#ifdef CRUXN_HAVE_VERBS
    &cruxn_verbs_ops,
#endif
    &cruxn_socket_ops,
    NULL,
};
