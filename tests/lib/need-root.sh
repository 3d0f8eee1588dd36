#!/bin/sh
# need-root.sh WHY CMD [ARG...]: run CMD as it is when we are root, else skip
# (exit 77, meson's "skipped") saying why root is needed. For tests of the
# software RDMA device, which sends RoCEv2 packets through a raw IP socket
# (CAP_NET_RAW).
why=$1
shift
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root: $why"
	exit 77
fi
exec "$@"
