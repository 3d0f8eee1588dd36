/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's streaming watch: one long POST to /v3/watch answered by a
 * chunked stream of newline-delimited JSON messages, parsed line by line.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/etcd.h"
#include "etcd_internal.h"

struct watch_ctx {
	struct etcd_buf line;
	size_t scanned; /* bytes of line already searched for a newline */
	crux_etcd_watch_fn fn;
	crux_etcd_stop_fn stop;
	void *arg;
	crux_status_t st; /* why the stream ended, CRUX_OK: asked to */
	bool done;
};

static bool watch_line(struct watch_ctx *w, const char *p, size_t n)
{
	while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	if (n == 0)
		return true;
	struct crux_etcd_watch_msg m;
	crux_status_t st = crux_etcd_parse_watch(p, n, &m);
	if (st != CRUX_OK) {
		w->st = st;
		return false;
	}
	bool go_on = true;
	if (m.canceled) {
		w->st = m.compact_revision > 0 ? CRUX_ERR_STALE : CRUX_ERR_REMOTE;
		go_on = false;
	} else if (!w->fn(w->arg, &m)) {
		w->st = CRUX_OK;
		go_on = false;
	}
	crux_etcd_watch_msg_free(&m);
	return go_on;
}

static size_t watch_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct watch_ctx *w = arg;
	size_t n = size * nmemb;
	if (crux_etcd_buf_write(data, 1, n, &w->line) != n) {
		w->st = CRUX_ERR_CORRUPT;
		w->done = true;
		return 0;
	}
	/* A large message comes in many pieces: search only the new bytes. */
	size_t start = 0;
	for (size_t i = w->scanned; i < w->line.len; i++) {
		if (w->line.p[i] != '\n')
			continue;
		if (!watch_line(w, w->line.p + start, i - start)) {
			w->done = true;
			return 0;
		}
		start = i + 1;
	}
	memmove(w->line.p, w->line.p + start, w->line.len - start);
	w->line.len -= start;
	w->scanned = w->line.len;
	return n;
}

static int watch_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	struct watch_ctx *w = arg;
	if (w->stop && w->stop(w->arg)) {
		w->st = CRUX_OK;
		w->done = true;
		return 1;
	}
	return 0;
}

crux_status_t crux_etcd_watch(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			      int64_t start_rev, crux_etcd_watch_fn fn, crux_etcd_stop_fn stop,
			      void *arg)
{
	json_object *req = json_object_new_object(), *cr = json_object_new_object();
	crux_status_t st = CRUX_ERR_NOMEM;
	CURL *c = NULL;
	if (!req || !cr) {
		json_object_put(cr);
		goto out;
	}
	json_object_object_add(req, "create_request", cr);
	if ((st = crux_etcd_key_json(cr, "key", key, klen, prefix)) != CRUX_OK)
		goto out;
	if (start_rev > 0)
		crux_etcd_add_i64(cr, "start_revision", start_rev);
	const char *body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (!body || !(c = curl_easy_init())) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	st = CRUX_ERR_REMOTE;
	for (size_t k = 0; k < e->nep; k++) {
		size_t idx = (e->cur + k) % e->nep;
		char url[320];
		snprintf(url, sizeof(url), "%s/v3/watch", e->eps[idx]);
		struct watch_ctx w = {.fn = fn, .stop = stop, .arg = arg, .st = CRUX_ERR_REMOTE};
		crux_etcd_setup_handle(e, c, url, body);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, watch_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, &w);
		CURLcode rc = curl_easy_perform(c);
		long http = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
		free(w.line.p);
		if (w.done) {
			st = w.st;
			if (st != CRUX_OK)
				snprintf(e->lasterr, sizeof(e->lasterr), "%s: watch ended: %s",
					 e->eps[idx], crux_status_str(st));
			goto out;
		}
		snprintf(e->lasterr, sizeof(e->lasterr), "%s: watch: %s (HTTP %ld)", e->eps[idx],
			 rc == CURLE_OK ? "stream closed" : curl_easy_strerror(rc), http);
		if (http == 200) {
			/* The stream was open and broke: the caller re-lists. */
			e->cur = idx;
			st = CRUX_ERR_REMOTE;
			goto out;
		}
	}
out:
	if (c)
		curl_easy_cleanup(c);
	json_object_put(req);
	return st;
}
