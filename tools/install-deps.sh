#!/bin/sh
# install-deps.sh PKG...: install the Debian packages that are missing.
# Only missing packages are installed; without root it names them and stops.
set -eu
missing=""
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "crux: these Debian packages are missing:$missing" >&2
	echo "crux: run as root, or install them first: sudo apt-get install$missing" >&2
	exit 1
fi
echo "crux: installing missing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
