/* SPDX-License-Identifier: Apache-2.0 */
/* JSON helpers shared by the host view and the schedule record codecs. */
#ifndef CRUX_CV_INTERNAL_H
#define CRUX_CV_INTERNAL_H

#include <json-c/json.h>

#include "crux/cluster_view.h"
#include "etcd_internal.h"

crux_status_t crux_cv_add_addr(json_object *arr, const struct crux_addr *a);
/* Serialise o into a malloc'ed string (CRUX_ERR_RANGE above CRUX_CV_MAX_TEXT). */
crux_status_t crux_cv_finish(json_object *o, char **out, size_t *len);
/* A required member of the given type, else CRUX_ERR_CORRUPT. */
crux_status_t crux_cv_get(json_object *o, const char *name, json_type type, json_object **out);
/* A required JSON integer in 0..max. */
crux_status_t crux_cv_uint(json_object *o, const char *name, uint64_t max, uint64_t *out);
/* A finite non-negative number. */
crux_status_t crux_cv_num(json_object *m, double *out);
/* An address string. */
crux_status_t crux_cv_addr(json_object *m, struct crux_addr *out);
/* "key": 16 lower-case hex digits, not 0. */
crux_status_t crux_cv_key(json_object *o, uint64_t *out);
/* A printable string of 1..cap-1 bytes. */
crux_status_t crux_cv_text(json_object *o, const char *name, char *buf, size_t cap);

#endif
