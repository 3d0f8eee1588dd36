/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election and fenced writes (see crux/elect.h). */
#include <stdio.h>
#include <string.h>

#include "crux/elect.h"

crux_status_t crux_elect_campaign(struct crux_etcd *e, const char *key, const char *me,
				  int64_t lease, int64_t *term, char *holder, size_t cap)
{
	size_t klen = strlen(key), mlen = strlen(me);
	if (klen == 0 || mlen == 0 || lease == 0)
		return CRUX_ERR_INVAL;
	struct crux_etcd_cmp absent = {.target = CRUX_ETCD_CMP_CREATE,
				       .result = CRUX_ETCD_EQUAL,
				       .key = key,
				       .klen = klen,
				       .number = 0};
	struct crux_etcd_op put = {.kind = CRUX_ETCD_OP_PUT,
				   .key = key,
				   .klen = klen,
				   .value = me,
				   .vlen = mlen,
				   .lease = lease};
	bool created = false;
	int64_t rev;
	crux_status_t st = crux_etcd_txn(e, &absent, 1, &put, 1, NULL, 0, &created, &rev);
	if (st != CRUX_OK)
		return st;
	/* Read back who holds it: on success that is us, at revision rev; a
	 * lost race or a key from an earlier run of ours shows here too. */
	struct crux_etcd_range r;
	if ((st = crux_etcd_get(e, key, klen, false, &r)) != CRUX_OK)
		return st;
	int64_t t = 0;
	if (r.n == 1) {
		const struct crux_etcd_kv *kv = &r.kvs[0];
		if (kv->lease == lease && kv->value_len == mlen && memcmp(kv->value, me, mlen) == 0)
			t = kv->create_revision;
		if (holder && cap)
			snprintf(holder, cap, "%.*s", (int)kv->value_len, (const char *)kv->value);
	} else if (holder && cap) {
		holder[0] = '\0'; /* expired between the txn and the read */
	}
	crux_etcd_range_free(&r);
	*term = t;
	return CRUX_OK;
}

crux_status_t crux_elect_fenced_put(struct crux_etcd *e, const char *leader_key, int64_t term,
				    int64_t lease, const char *key, const void *val, size_t vlen,
				    int64_t *revision)
{
	if (term <= 0)
		return CRUX_ERR_PERM;
	size_t lk = strlen(leader_key);
	struct crux_etcd_cmp fence[2] = {
	    {.target = CRUX_ETCD_CMP_CREATE,
	     .result = CRUX_ETCD_EQUAL,
	     .key = leader_key,
	     .klen = lk,
	     .number = term},
	    /* A plain put on the leader key keeps its create revision but
	     * detaches it from the lease: that is no longer our leadership. */
	    {.target = CRUX_ETCD_CMP_LEASE,
	     .result = CRUX_ETCD_EQUAL,
	     .key = leader_key,
	     .klen = lk,
	     .number = lease},
	};
	struct crux_etcd_op put = {
	    .kind = CRUX_ETCD_OP_PUT, .key = key, .klen = strlen(key), .value = val, .vlen = vlen};
	bool ok = false;
	int64_t rev = 0;
	crux_status_t st = crux_etcd_txn(e, fence, lease ? 2 : 1, &put, 1, NULL, 0, &ok, &rev);
	if (st != CRUX_OK)
		return st;
	if (!ok)
		return CRUX_ERR_PERM;
	if (revision)
		*revision = rev;
	return CRUX_OK;
}

crux_status_t crux_elect_resign(struct crux_etcd *e, const char *leader_key, int64_t term)
{
	size_t klen = strlen(leader_key);
	struct crux_etcd_cmp fence = {.target = CRUX_ETCD_CMP_CREATE,
				      .result = CRUX_ETCD_EQUAL,
				      .key = leader_key,
				      .klen = klen,
				      .number = term};
	struct crux_etcd_op del = {.kind = CRUX_ETCD_OP_DELETE, .key = leader_key, .klen = klen};
	bool ok = false;
	int64_t rev;
	crux_status_t st = crux_etcd_txn(e, &fence, 1, &del, 1, NULL, 0, &ok, &rev);
	if (st != CRUX_OK)
		return st;
	return ok ? CRUX_OK : CRUX_ERR_PERM;
}

crux_status_t crux_elect_drop_leaseless(struct crux_etcd *e, const char *leader_key, int64_t create,
					bool *dropped)
{
	size_t klen = strlen(leader_key);
	struct crux_etcd_cmp cmp[2] = {
	    {.target = CRUX_ETCD_CMP_CREATE,
	     .result = CRUX_ETCD_EQUAL,
	     .key = leader_key,
	     .klen = klen,
	     .number = create},
	    {.target = CRUX_ETCD_CMP_LEASE,
	     .result = CRUX_ETCD_EQUAL,
	     .key = leader_key,
	     .klen = klen,
	     .number = 0},
	};
	struct crux_etcd_op del = {.kind = CRUX_ETCD_OP_DELETE, .key = leader_key, .klen = klen};
	*dropped = false;
	if (create <= 0)
		return CRUX_ERR_INVAL;
	return crux_etcd_txn(e, cmp, 2, &del, 1, NULL, 0, dropped, NULL);
}
