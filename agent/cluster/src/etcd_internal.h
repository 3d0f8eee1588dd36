/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between the etcd client's transport and its parsers. */
#ifndef CRUX_ETCD_INTERNAL_H
#define CRUX_ETCD_INTERNAL_H

#include <json-c/json.h>

#include "crux/etcd.h"

/* No answer (or watch line) larger than this is read. */
#define ETCD_MAX_BODY (64u << 20)

/* Parse one JSON object (trailing whitespace allowed). */
crux_status_t etcd_json_parse(const char *body, size_t len, json_object **out);
/* A 64-bit integer member (string or number); 0 when absent. */
crux_status_t etcd_json_i64(json_object *o, const char *name, int64_t *out);
crux_status_t etcd_range_from_json(json_object *o, struct crux_etcd_range *out);

#endif
