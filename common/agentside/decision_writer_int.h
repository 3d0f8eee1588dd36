/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision table's writer, private to libcrux-agentside:
 * decision_writer.c (banks, publish, the shadow file's sync),
 * decision_open.c (file, memfd and shadow opening, adoption of a previous
 * writer's entries), decision_holder.c (who holds the table's lock).
 */
#ifndef CRUX_DECISION_WRITER_INT_H
#define CRUX_DECISION_WRITER_INT_H

#include <stdbool.h>
#include <sys/types.h>

#include "crux/decision_writer.h"
#include "decision_layout.h"

struct crux_dt_writer {
	struct crux_shm_map map;
	struct dt_file *f;
	struct dt_bank
	    *stage; /* the current contents, private: what the next publish starts from */
	struct dt_bank *scratch; /* the next contents while they are built and checked */
	/* Shadow mode (cruxd): the table is a memfd; the file is written, never mapped. */
	int shadow_fd;
	char shadow_dir[CRUX_PATH_MAX];
	char shadow_path[CRUX_PATH_MAX];
	int shadow_said;
};

/* A writer with its staging buffers and validated settings '*s', no file yet. */
crux_status_t crux_dt_writer_new(const struct crux_dt_settings *settings,
				 struct crux_dt_settings *s, struct crux_dt_writer **out, char *err,
				 size_t errlen);
/* The inverse of crux_dt_writer_new (files, mappings and descriptors are the caller's). */
void crux_dt_writer_free_bare(struct crux_dt_writer *w);
/* After mapping: adopt the old entries ('keep'), settings, writer identity, first publish. */
void crux_dt_writer_finish(struct crux_dt_writer *w, bool keep, const struct crux_dt_settings *sp);
/* A new file's contents: both banks empty under settings 'arg'. */
void crux_dt_init_file(void *base, void *arg);
/* Replace a removed, replaced or truncated shadow file with a whole copy of the table. */
void crux_dt_shadow_rewrite(struct crux_dt_writer *w);

/* Is 'fd' still the file named 'path'? (A concurrent writer may have replaced it.) */
bool crux_dt_still_named_fd(int fd, const char *path);
/* The process holding the table's lock: mapped, or open on 'fd'; 0 if none found. */
pid_t crux_dt_holder_of_map(const struct crux_shm_map *m);
pid_t crux_dt_holder_of_fd(int fd);

#endif /* CRUX_DECISION_WRITER_INT_H */
