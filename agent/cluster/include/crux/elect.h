/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election on etcd (the Patroni pattern): the leader key is created
 * only if absent (txn compare CREATE == 0), on the candidate's lease, so it
 * vanishes when the leader stops renewing. The leader's term is the key's
 * create revision; every leader write is a txn that compares it, so a
 * deposed leader (frozen, partitioned, slow) cannot overwrite the schedule a
 * newer leader wrote.
 */
#ifndef CRUX_ELECT_H
#define CRUX_ELECT_H

#include "crux/etcd.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Try to become leader: create key = me on lease if absent. *term > 0 when
 * we hold it (also when we already did), 0 when someone else does; *holder
 * (optional, cap bytes) names the current holder.
 */
crux_status_t crux_elect_campaign(struct crux_etcd *e, const char *key, const char *me,
				  int64_t lease, int64_t *term, char *holder, size_t cap);
/* put (key, val) only while the leader key still has create revision term
 * and (lease != 0) is still on that lease: CRUX_ERR_PERM when we are no
 * longer the leader. */
crux_status_t crux_elect_fenced_put(struct crux_etcd *e, const char *leader_key, int64_t term,
				    int64_t lease, const char *key, const void *val, size_t vlen,
				    int64_t *revision);
/* A leader key detached from any lease (a plain put by hand) never expires:
 * delete it if it still has create revision 'create' and no lease, so the
 * next campaign elects a leader on a lease again. */
crux_status_t crux_elect_drop_leaseless(struct crux_etcd *e, const char *leader_key, int64_t create,
					bool *dropped);
/* Give leadership up (delete the leader key if it is still our term). */
crux_status_t crux_elect_resign(struct crux_etcd *e, const char *leader_key, int64_t term);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_ELECT_H */
