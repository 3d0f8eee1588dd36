/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile record file layout (private to common; version CRUX_PROF_VERSION):
 *
 *   struct crux_shm_header  writer pid + start time (must match the name)
 *   identity                written once before the file is published
 *   compute section         seq counter + publish count + crux_prof_compute
 *   net section             seq counter + publish count + crux_prof_net
 *
 * The two sections sit on their own cache lines: the preload and the plugin
 * publish from different threads without sharing a line.
 *
 * Roles: profile_layout.c (names, size), profile_record.c (the training
 * process's record: memfd, publish, v1 file mirror) in libcrux-common; the
 * agent's reader and its copies in libcrux-agentside (common/agentside).
 */
#ifndef CRUX_PROFILE_LAYOUT_H
#define CRUX_PROFILE_LAYOUT_H

#include <stddef.h>

#include "crux/profile.h"
#include "crux/seqlock.h"
#include "crux/shm.h"

struct prof_compute_sec {
	_Alignas(64) crux_seq_t seq;
	uint64_t count; /* publishes so far; 0 = never */
	struct crux_prof_compute data;
};

struct prof_net_sec {
	_Alignas(64) crux_seq_t seq;
	uint64_t count;
	struct crux_prof_net data;
};

struct prof_file {
	struct crux_shm_header hdr;
	struct crux_prof_identity id;
	struct prof_compute_sec compute;
	struct prof_net_sec net;
};

_Static_assert(offsetof(struct prof_file, id) == 64, "identity follows the header");

/*
 * Read attempts per section. The agent is no data path: it may wait out a
 * writer copying a whole section (~10 KB) rather than skip the record.
 */
#define PROF_READ_RETRIES 4096
_Static_assert(offsetof(struct prof_compute_sec, seq) == 0 &&
		   offsetof(struct prof_net_sec, seq) == 0,
	       "a section begins with its counter");

#endif /* CRUX_PROFILE_LAYOUT_H */
