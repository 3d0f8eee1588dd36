/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Versioned, fixed-size, pointer-free records in files under the
 * shared-memory directory (CRUX_SHM_DIR, default /dev/shm/crux).
 *
 * Every record file starts with struct crux_shm_header. Opening validates
 * magic, layout version, header size, total size against the file size, and
 * refuses symlinks, non-regular files and a world-writable directory.
 */
#ifndef CRUX_SHM_H
#define CRUX_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/clock.h"
#include "crux/env.h"
#include "crux/seqlock.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_SHM_DIR_DEFAULT "/dev/shm/crux"
#define CRUX_PATH_MAX	     256
/* The one limit on CRUX_SHM_DIR's length: DIR/cruxd.sock must fit a Unix
 * socket address (108 bytes with its NUL), so 108 - 12 = 96 characters. */
#define CRUX_SHM_DIR_MAX 96

/* Common header of every record file; 64 bytes. */
struct crux_shm_header {
	uint32_t magic;		 /* record kind, e.g. CRUX_DT_MAGIC */
	uint16_t layout_version; /* bumped on any incompatible layout change */
	uint16_t header_size;	 /* sizeof(struct crux_shm_header) */
	uint64_t total_size;	 /* size of the whole file in bytes */
	uint32_t writer_pid;	 /* process that writes the record */
	uint32_t flags;
	uint64_t
	    writer_start_time; /* writer's start time (clock ticks since boot), pid-reuse guard */
	_Atomic uint64_t generation;   /* bumped on every published change */
	_Atomic uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of the writer's last sign of life */
	uint64_t reserved[2];
};

/* A mapped record file. */
struct crux_shm_map {
	void *base;
	size_t size;
	int fd;
	bool writable;
	char path[CRUX_PATH_MAX];
};

/*
 * Resolve the directory: CRUX_SHM_DIR through fn (NULL = getenv), else the
 * default. CRUX_ERR_INVAL for a relative or too long path.
 */
crux_status_t crux_shm_dir(crux_getenv_fn fn, void *arg, char *buf, size_t len);

/*
 * Check (and with 'create', make with mode 0755) the directory: it must be a
 * real directory (no symlink), owned by root or by us, and not writable by
 * group or others. CRUX_ERR_PERM with a logged message naming the problem
 * and the fix otherwise.
 */
crux_status_t crux_shm_dir_check(const char *dir, bool create);

/*
 * Create or replace a record file 'dir/name' of 'size' bytes with the given
 * mode (0644 for records others read), zero-filled, header initialised with
 * magic/version/size and writer = this process; published atomically (no
 * reader ever sees a half-initialised header).
 * With 'exclusive', CRUX_ERR_EXIST if the file already exists.
 */
crux_status_t crux_shm_create(const char *dir, const char *name, uint32_t magic,
			      uint16_t layout_version, size_t size, mode_t mode, bool exclusive,
			      struct crux_shm_map *out);

/*
 * Open and map an existing record file, read-only or read-write, and
 * validate it (crux_shm_validate). Never follows symlinks.
 */
crux_status_t crux_shm_open(const char *dir, const char *name, uint32_t magic,
			    uint16_t layout_version, size_t size, bool writable,
			    struct crux_shm_map *out);

/*
 * Validate a header found in a buffer of 'avail' bytes: magic, version,
 * header size, total size == expected_size <= avail.
 * CRUX_ERR_CORRUPT (bad magic/size), CRUX_ERR_VERSION (other version).
 */
crux_status_t crux_shm_validate(const void *buf, size_t avail, uint32_t magic,
				uint16_t layout_version, size_t expected_size);

void crux_shm_unmap(struct crux_shm_map *map);

/*
 * Variants that do not log: on failure they write a message naming the file,
 * the problem and the fix into 'err' (may be NULL) for the caller to log
 * once (the plugin retries opens and must not flood NCCL's log). The plain
 * functions above log that message themselves (NOENT only at debug level).
 */
crux_status_t crux_shm_dir_check_ex(const char *dir, bool create, char *err, size_t errlen);
crux_status_t crux_shm_open_ex(const char *dir, const char *name, uint32_t magic,
			       uint16_t layout_version, size_t size, bool writable,
			       struct crux_shm_map *out, char *err, size_t errlen);
crux_status_t crux_shm_validate_ex(const void *buf, size_t avail, uint32_t magic,
				   uint16_t layout_version, size_t expected_size, char *err,
				   size_t errlen);

/*
 * Called by crux_shm_create_ex on the mapped, zero-filled file after the
 * header is set and before the file is published under its name: fields
 * written here (e.g. a record's fixed identity) are never seen half-written.
 */
typedef void (*crux_shm_init_fn)(void *base, void *arg);
crux_status_t crux_shm_create_ex(const char *dir, const char *name, uint32_t magic,
				 uint16_t layout_version, size_t size, mode_t mode, bool exclusive,
				 crux_shm_init_fn init, void *init_arg, struct crux_shm_map *out,
				 char *err, size_t errlen);

/*
 * Sealed anonymous records (contract v2, see common/README.md): a memfd that
 * lives only as long as someone holds its descriptor, so nothing in a
 * directory can be truncated, replaced or removed under a reader.
 *
 * crux_memfd_create makes a memfd named 'name' of 'size' bytes, maps it
 * writable, initialises the header (writer = this process) and runs 'init',
 * and then adds 'seals' (e.g. CRUX_SEALS_TABLE). The writable mapping made
 * before F_SEAL_FUTURE_WRITE stays writable for this process only.
 */
#define CRUX_SEALS_PROFILE 0x0006u /* F_SEAL_SHRINK | F_SEAL_GROW */
#define CRUX_SEALS_TABLE   0x0016u /* F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE */
crux_status_t crux_memfd_create(const char *name, uint32_t magic, uint16_t layout_version,
				size_t size, unsigned seals, crux_shm_init_fn init, void *init_arg,
				struct crux_shm_map *out, char *err, size_t errlen);

/*
 * Map a descriptor received from another process (the map keeps its own
 * duplicate; the caller still owns 'fd'). The descriptor must be a regular
 * file of exactly 'size' bytes carrying at least the seals in 'need_seals'
 * (checked with F_GET_SEALS before mapping), so it can never shrink under
 * the mapping; then the header is validated like a file's.
 */
crux_status_t crux_memfd_map(int fd, uint32_t magic, uint16_t layout_version, size_t size,
			     unsigned need_seals, bool writable, struct crux_shm_map *out,
			     char *err, size_t errlen);

/*
 * Start time of process 'pid' (field 22 of /proc/PID/stat, clock ticks since
 * boot). With pid, a process identity that survives pid reuse.
 * CRUX_ERR_NOENT when the process does not exist.
 */
crux_status_t crux_proc_start_time(pid_t pid, uint64_t *out);

/* True when 'pid' is alive and started at 'start_time'. */
bool crux_proc_alive(pid_t pid, uint64_t start_time);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SHM_H */
