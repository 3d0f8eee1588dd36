/* SPDX-License-Identifier: Apache-2.0 */
/* Topology generators (Clos, double-sided) and the Lingjun CSV loader. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

static int bad_rate(double g)
{
	return !isfinite(g) || g <= 0;
}

static int add_named(struct topo_builder *b, const char *prefix, int i, int is_host)
{
	char name[64];

	snprintf(name, sizeof(name), "%s%d", prefix, i);
	return crux_sched_tb_add_node(b, name, is_host);
}

static int add_cables(struct topo_builder *b, int a, int c, double gbps, int count)
{
	for (int i = 0; i < count; i++)
		if (crux_sched_tb_add_cable(b, a, c, GBPS_TO_BYTES(gbps)) < 0)
			return -1;
	return 0;
}

crux_status_t crux_sched_topo_clos2(const struct crux_sched_clos2_params *p,
				    struct crux_sched_topo **out, struct crux_sched_err *err)
{
	struct topo_builder b;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (p->n_tor < 1 || p->n_agg < 1 || p->hosts_per_tor < 1 || p->tor_uplinks < 1 ||
	    bad_rate(p->host_gbps) || bad_rate(p->tor_gbps)) {
		crux_sched_errf(err, "clos2: counts must be >= 1 and rates > 0");
		return CRUX_ERR_INVAL;
	}
	crux_sched_tb_init(&b);
	int nh = p->n_tor * p->hosts_per_tor;

	for (int i = 0; i < nh; i++)
		if (add_named(&b, "h", i, 1) < 0)
			goto fail;
	for (int i = 0; i < p->n_tor; i++)
		if (add_named(&b, "tor", i, 0) < 0)
			goto fail;
	for (int i = 0; i < p->n_agg; i++)
		if (add_named(&b, "agg", i, 0) < 0)
			goto fail;
	for (int i = 0; i < nh; i++)
		if (add_cables(&b, i, nh + i / p->hosts_per_tor, p->host_gbps, 1))
			goto fail;
	for (int r = 0; r < p->n_tor; r++)
		for (int a = 0; a < p->n_agg; a++)
			if (add_cables(&b, nh + r, nh + p->n_tor + a, p->tor_gbps, p->tor_uplinks))
				goto fail;
	st = crux_sched_tb_finish(&b, out, err);
	crux_sched_tb_free(&b);
	return st;
fail:
	crux_sched_tb_free(&b);
	crux_sched_errf(err, "clos2: out of memory");
	return st;
}

crux_status_t crux_sched_topo_clos3(const struct crux_sched_clos3_params *p,
				    struct crux_sched_topo **out, struct crux_sched_err *err)
{
	struct topo_builder b;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (p->n_pods < 1 || p->tors_per_pod < 1 || p->aggs_per_pod < 1 || p->n_core < 1 ||
	    p->hosts_per_tor < 1 || bad_rate(p->host_gbps) || bad_rate(p->tor_gbps) ||
	    bad_rate(p->agg_gbps)) {
		crux_sched_errf(err, "clos3: counts must be >= 1 and rates > 0");
		return CRUX_ERR_INVAL;
	}
	crux_sched_tb_init(&b);
	int ntor = p->n_pods * p->tors_per_pod, nagg = p->n_pods * p->aggs_per_pod;
	int nh = ntor * p->hosts_per_tor;

	for (int i = 0; i < nh; i++)
		if (add_named(&b, "h", i, 1) < 0)
			goto fail;
	for (int i = 0; i < ntor; i++)
		if (add_named(&b, "tor", i, 0) < 0)
			goto fail;
	for (int i = 0; i < nagg; i++)
		if (add_named(&b, "agg", i, 0) < 0)
			goto fail;
	for (int i = 0; i < p->n_core; i++)
		if (add_named(&b, "core", i, 0) < 0)
			goto fail;
	for (int i = 0; i < nh; i++)
		if (add_cables(&b, i, nh + i / p->hosts_per_tor, p->host_gbps, 1))
			goto fail;
	for (int r = 0; r < ntor; r++) {
		int pod = r / p->tors_per_pod;

		for (int a = 0; a < p->aggs_per_pod; a++)
			if (add_cables(&b, nh + r, nh + ntor + pod * p->aggs_per_pod + a,
				       p->tor_gbps, 1))
				goto fail;
	}
	for (int a = 0; a < nagg; a++)
		for (int c = 0; c < p->n_core; c++)
			if (add_cables(&b, nh + ntor + a, nh + ntor + nagg + c, p->agg_gbps, 1))
				goto fail;
	st = crux_sched_tb_finish(&b, out, err);
	crux_sched_tb_free(&b);
	return st;
fail:
	crux_sched_tb_free(&b);
	crux_sched_errf(err, "clos3: out of memory");
	return st;
}

crux_status_t crux_sched_topo_dsided(const struct crux_sched_dsided_params *p,
				     struct crux_sched_topo **out, struct crux_sched_err *err)
{
	struct topo_builder b;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (p->n_hosts < 1 || p->n_tor < 2 || p->n_agg < 1 || p->n_core < 1 || p->host_links < 2 ||
	    p->host_links % 2 || bad_rate(p->host_gbps) || bad_rate(p->tor_gbps) ||
	    bad_rate(p->agg_gbps)) {
		crux_sched_errf(
		    err, "dsided: needs >= 1 host, >= 2 ToRs, an even host_links >= 2, rates > 0");
		return CRUX_ERR_INVAL;
	}
	crux_sched_tb_init(&b);
	int nh = p->n_hosts;

	for (int i = 0; i < nh; i++)
		if (add_named(&b, "h", i, 1) < 0)
			goto fail;
	for (int i = 0; i < p->n_tor; i++)
		if (add_named(&b, "tor", i, 0) < 0)
			goto fail;
	for (int i = 0; i < p->n_agg; i++)
		if (add_named(&b, "agg", i, 0) < 0)
			goto fail;
	for (int i = 0; i < p->n_core; i++)
		if (add_named(&b, "core", i, 0) < 0)
			goto fail;
	/* Host i sits on ToR pair (2q, 2q+1), q = i mod (n_tor / 2): the two sides. */
	int pairs = p->n_tor / 2;

	for (int i = 0; i < nh; i++) {
		int q = i % pairs;

		if (add_cables(&b, i, nh + 2 * q, p->host_gbps, p->host_links / 2) ||
		    add_cables(&b, i, nh + 2 * q + 1, p->host_gbps, p->host_links / 2))
			goto fail;
	}
	for (int r = 0; r < p->n_tor; r++)
		for (int a = 0; a < p->n_agg; a++)
			if (add_cables(&b, nh + r, nh + p->n_tor + a, p->tor_gbps, 1))
				goto fail;
	for (int a = 0; a < p->n_agg; a++)
		for (int c = 0; c < p->n_core; c++)
			if (add_cables(&b, nh + p->n_tor + a, nh + p->n_tor + p->n_agg + c,
				       p->agg_gbps, 1))
				goto fail;
	st = crux_sched_tb_finish(&b, out, err);
	crux_sched_tb_free(&b);
	return st;
fail:
	crux_sched_tb_free(&b);
	crux_sched_errf(err, "dsided: out of memory");
	return st;
}

void crux_sched_lingjun_defaults(struct crux_sched_lingjun_params *p)
{
	/* Assumed rates (the CSV has none): 200G host NIC, 400G uplinks, 2 parallel. */
	p->host_gbps = 200;
	p->tor_gbps = 400;
	p->agg_gbps = 400;
	p->tor_uplinks = 2;
	p->agg_uplinks = 2;
}

crux_status_t crux_sched_topo_lingjun(const char *csv_path,
				      const struct crux_sched_lingjun_params *p,
				      struct crux_sched_topo **out, struct crux_sched_err *err)
{
	struct topo_builder b;
	char *text = NULL;
	size_t len;
	char **tok = NULL;
	crux_status_t st;
	int lineno = 0;

	if (bad_rate(p->host_gbps) || bad_rate(p->tor_gbps) || bad_rate(p->agg_gbps) ||
	    p->tor_uplinks < 1 || p->agg_uplinks < 1) {
		crux_sched_errf(err, "lingjun: rates must be > 0 and uplink counts >= 1");
		return CRUX_ERR_INVAL;
	}
	st = crux_sched_read_file_text(csv_path, &text, &len, err);
	if (st)
		return st;
	crux_sched_tb_init(&b);
	/* Two passes: hosts first (so they get the low indices), then switches and cables. */
	for (int pass = 0; pass < 2; pass++) {
		char *cur = text;

		lineno = 0;
		while (cur && *cur) {
			char *next = strchr(cur, '\n');
			char *f[5];
			char lbuf[1024];
			int nf = 0;

			if (next)
				*next++ = '\0';
			lineno++;
			size_t l = strlen(cur);

			if (l && cur[l - 1] == '\r')
				l--;
			if (l == 0 || (lineno == 1 && !strncmp(cur, "ip,", 3)))
				goto next_line;
			if (l >= sizeof(lbuf)) {
				crux_sched_errf(err, "%s:%d: line longer than %zu bytes", csv_path,
						lineno, sizeof(lbuf) - 1);
				st = CRUX_ERR_INVAL;
				goto out;
			}
			memcpy(lbuf, cur, l);
			lbuf[l] = '\0';
			{
				char *s = lbuf;

				for (;;) {
					if (nf == 5)
						break;
					f[nf++] = s;
					s = strchr(s, ',');
					if (!s)
						break;
					*s++ = '\0';
				}
			}
			if (nf != 4 || !*f[0] || !*f[1] || !*f[2] || !*f[3]) {
				crux_sched_errf(err,
						"%s:%d: malformed line; expected 'ip,DSW,PSW,ASW'",
						csv_path, lineno);
				st = CRUX_ERR_INVAL;
				goto out;
			}
			if (pass == 0) {
				int r = crux_sched_tb_add_node(&b, f[0], 1);

				if (r == -2) {
					crux_sched_errf(err,
							"%s:%d: field 'ip': duplicate host '%s'",
							csv_path, lineno, f[0]);
					st = CRUX_ERR_INVAL;
					goto out;
				}
				if (r < 0)
					goto nomem;
			} else {
				char asw[160], psw[160], dsw[160];
				int h = crux_sched_tb_find(&b, f[0]), s_a, s_p, s_d;

				snprintf(dsw, sizeof(dsw), "dsw:%s", f[1]);
				snprintf(psw, sizeof(psw), "psw:%s", f[2]);
				snprintf(asw, sizeof(asw), "asw:%s/%s", f[2], f[3]);
				s_d = crux_sched_tb_find(&b, dsw);
				if (s_d < 0 && (s_d = crux_sched_tb_add_node(&b, dsw, 0)) < 0)
					goto nomem;
				s_p = crux_sched_tb_find(&b, psw);
				if (s_p < 0) {
					if ((s_p = crux_sched_tb_add_node(&b, psw, 0)) < 0)
						goto nomem;
					for (int u = 0; u < p->agg_uplinks; u++)
						if (crux_sched_tb_add_cable(
							&b, s_p, s_d, GBPS_TO_BYTES(p->agg_gbps)) <
						    0)
							goto nomem;
				}
				s_a = crux_sched_tb_find(&b, asw);
				if (s_a < 0) {
					if ((s_a = crux_sched_tb_add_node(&b, asw, 0)) < 0)
						goto nomem;
					for (int u = 0; u < p->tor_uplinks; u++)
						if (crux_sched_tb_add_cable(
							&b, s_a, s_p, GBPS_TO_BYTES(p->tor_gbps)) <
						    0)
							goto nomem;
				}
				if (crux_sched_tb_add_cable(&b, h, s_a,
							    GBPS_TO_BYTES(p->host_gbps)) < 0)
					goto nomem;
			}
		next_line:
			if (next)
				next[-1] = '\n';
			cur = next;
		}
	}
	st = crux_sched_tb_finish(&b, out, err);
	goto out;
nomem:
	crux_sched_errf(err, "%s: out of memory", csv_path);
	st = CRUX_ERR_NOMEM;
out:
	crux_sched_tb_free(&b);
	free(text);
	free(tok);
	return st;
}
