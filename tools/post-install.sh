#!/bin/sh
# meson install hook: refresh the dynamic linker's cache so the freshly
# installed libraries (plugin, preload, profiler) are found by name. Skipped
# for staged installs (DESTDIR: a package's own scripts run ldconfig) and when
# not root (no cache to write; the message says what to run).
if [ -n "${DESTDIR:-}" ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "crux: not root, so the linker cache was not refreshed: run 'sudo ldconfig'" >&2
	exit 0
fi
if command -v ldconfig >/dev/null 2>&1; then
	ldconfig || echo "crux: ldconfig failed: run it by hand" >&2
elif [ -x /sbin/ldconfig ]; then
	/sbin/ldconfig || echo "crux: ldconfig failed: run it by hand" >&2
fi
exit 0
