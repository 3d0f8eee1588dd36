/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's side of the profile records (libcrux-agentside: cruxd,
 * cruxctl): reading, scanning and validating records, and cruxd's copies of
 * the attached ones. A training process writes its own record
 * (crux/profile.h) and never links this.
 */
#ifndef CRUX_PROFILE_SCAN_H
#define CRUX_PROFILE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "crux/profile.h"
#include "crux/shm.h"

#ifdef __cplusplus
extern "C" {
#endif

enum crux_prof_scan_flags {
	CRUX_PROF_SCAN_REAP = 0x1, /* remove records of processes that no longer exist */
	/*
	 * The directory holds cruxd's copies of attached records: snapshots say
	 * attached, with the uid cruxd wrote (the file owner is cruxd).
	 */
	CRUX_PROF_SCAN_AGENT_COPIES = 0x2,
};

struct crux_prof_scan_stats {
	uint32_t valid;
	uint32_t invalid; /* skipped: corrupt, foreign, wrong version, unsafe file */
	uint32_t busy;	  /* skipped this time: writer kept it busy */
	uint32_t reaped;  /* removed: process gone */
};

/* Called once per valid record; return non-zero to stop the scan. */
typedef int (*crux_prof_scan_fn)(void *arg, const struct crux_prof_snapshot *snap);

/*
 * Visit every record in 'dir'. Invalid records are skipped with one log line
 * per file name (not repeated on later scans of the same file).
 * 'stats' may be NULL.
 */
crux_status_t crux_prof_scan(const char *dir, unsigned flags, crux_prof_scan_fn fn, void *arg,
			     struct crux_prof_scan_stats *stats);

/* Read one record file by name (cruxctl, tests). */
crux_status_t crux_prof_read(const char *dir, const char *name, struct crux_prof_snapshot *out);

/* As crux_prof_read, without logging: 'err' (may be NULL) gets the message. */
crux_status_t crux_prof_read_ex(const char *dir, const char *name, struct crux_prof_snapshot *out,
				char *err, size_t errlen);

/*
 * The readers' validation on a record image of 'size' bytes (8-byte aligned):
 * header, identity, both sections (consistent copies, bounds). With
 * expect_pid > 0 the header must name that pid and start time (as the file
 * name does). Fills 'out' except out->file; 'out' is scratch space here and
 * holds a valid snapshot only when CRUX_OK is returned. Used by
 * crux_prof_read (through a private copy) and the fuzz target.
 */
crux_status_t crux_prof_validate_buffer(const void *base, size_t size, pid_t expect_pid,
					uint64_t expect_start, struct crux_prof_snapshot *out,
					char *err, size_t errlen);

/*
 * cruxd's copies of the attached records, for cruxctl: one record file per
 * attached process in CRUX_SHM_DIR/attached/ (a directory cruxd owns, mode
 * 0755), named and headed with the kernel's pid and start time, the
 * identity carrying the kernel's uid (agent_uid). Written with pwrite under
 * the seqlock protocol, never mapped; a damaged or removed copy is written
 * anew at the next pass; copies of processes gone are removed at the end of
 * a pass. No descriptor of a process's record ever leaves cruxd.
 */
#define CRUX_PROF_ATTACHED_DIR "attached"
struct crux_prof_copies;
crux_status_t crux_prof_copies_open(const char *shm_dir, struct crux_prof_copies **out, char *err,
				    size_t errlen);
void crux_prof_copies_begin(struct crux_prof_copies *c);
/* Write the copy of one attached record (s->pid, s->start_time, s->uid are the kernel's). */
void crux_prof_copies_put(struct crux_prof_copies *c, const struct crux_prof_snapshot *s);
/* Remove the copies of processes not put since crux_prof_copies_begin. */
void crux_prof_copies_end(struct crux_prof_copies *c);
/* With 'remove', delete every copy and the directory (clean shutdown). */
void crux_prof_copies_close(struct crux_prof_copies *c, bool remove);

/*
 * Map a received record read-only after checking it is a
 * sealed memfd of the right size and header; read it with
 * crux_prof_validate_buffer(map.base, map.size, 0, 0, ...).
 */
crux_status_t crux_prof_map_fd(int fd, struct crux_shm_map *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_PROFILE_SCAN_H */
