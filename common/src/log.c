/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log context: the only process-wide state of common/. Every field is an
 * atomic so the data path reads it without locks.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/env.h"
#include "crux/log.h"

#define CRUX_LOG_COMPONENT_LEN 32
#define CRUX_LOG_ONCE_SLOTS    256

struct crux_log_ctx {
	_Atomic int level;
	_Atomic(crux_log_sink_fn) sink;
	_Atomic(void *) sink_arg;
	char component[CRUX_LOG_COMPONENT_LEN];
	/* Keys already logged by crux_log_once_key (bounded ring of hashes). */
	_Atomic uint64_t once_keys[CRUX_LOG_ONCE_SLOTS];
	_Atomic uint32_t once_next;
	_Atomic bool timestamps; /* UTC time first on stderr lines */
};

static struct crux_log_ctx crux_log_ctx = {
    .level = CRUX_LOG_WARN,
    .component = "crux",
};

static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};

crux_status_t crux_log_parse_level(crux_getenv_fn fn, void *arg, enum crux_log_level *out,
				   char *err, size_t errlen)
{
	const char *v = crux_env_get(fn, arg, "CRUX_LOG_LEVEL");
	if (!v) {
		*out = CRUX_LOG_WARN;
		return CRUX_OK;
	}
	/* Numbers 0..3 are accepted as well as the names. */
	if (v[0] >= '0' && v[0] <= '3' && v[1] == '\0') {
		*out = (enum crux_log_level)(v[0] - '0');
		return CRUX_OK;
	}
	int idx;
	crux_status_t st =
	    crux_env_enum(fn, arg, "CRUX_LOG_LEVEL", level_names, CRUX_LOG_WARN, &idx, NULL, 0);
	if (st != CRUX_OK) {
		if (err && errlen) {
			char shown[CRUX_ENV_SHOWN_LEN];
			crux_env_quote(v, shown, sizeof(shown));
			snprintf(err, errlen,
				 "CRUX_LOG_LEVEL='%s' is not valid: expected one of error, warn, "
				 "info, debug or 0..3",
				 shown);
		}
		return CRUX_ERR_INVAL;
	}
	*out = (enum crux_log_level)idx;
	return CRUX_OK;
}

crux_status_t crux_log_init(const char *component)
{
	struct crux_log_ctx *c = &crux_log_ctx;
	if (component && component[0])
		snprintf(c->component, sizeof(c->component), "%s", component);

	enum crux_log_level lvl;
	char err[256];
	if (crux_log_parse_level(NULL, NULL, &lvl, err, sizeof(err)) != CRUX_OK) {
		atomic_store(&c->level, CRUX_LOG_WARN);
		/* The caller says what follows (cruxd exits, the plugin stays off, ...). */
		crux_log_msg(CRUX_LOG_ERROR, __FILE__, __LINE__, "%s", err);
		return CRUX_ERR_INVAL;
	}
	atomic_store(&c->level, (int)lvl);
	return CRUX_OK;
}

void crux_log_set_sink(crux_log_sink_fn sink, void *arg)
{
	/* Argument first: a concurrent logger that sees the new sink sees its argument. */
	atomic_store(&crux_log_ctx.sink_arg, arg);
	atomic_store(&crux_log_ctx.sink, sink);
}

void crux_log_set_timestamps(bool on)
{
	atomic_store(&crux_log_ctx.timestamps, on);
}

void crux_log_set_level(enum crux_log_level level)
{
	if ((int)level < CRUX_LOG_ERROR)
		level = CRUX_LOG_ERROR;
	if (level > CRUX_LOG_DEBUG)
		level = CRUX_LOG_DEBUG;
	atomic_store_explicit(&crux_log_ctx.level, (int)level, memory_order_relaxed);
}

enum crux_log_level crux_log_get_level(void)
{
	return (enum crux_log_level)atomic_load_explicit(&crux_log_ctx.level, memory_order_relaxed);
}

static const char *level_tag(enum crux_log_level level)
{
	switch (level) {
	case CRUX_LOG_ERROR:
		return "ERROR";
	case CRUX_LOG_WARN:
		return "WARN";
	case CRUX_LOG_INFO:
		return "INFO";
	case CRUX_LOG_DEBUG:
		return "DEBUG";
	}
	return "?";
}

void crux_log_vmsg(enum crux_log_level level, const char *file, int line, const char *fmt,
		   va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		msg[--n] = '\0';

	crux_log_sink_fn sink = atomic_load(&crux_log_ctx.sink);
	if (sink) {
		sink(atomic_load(&crux_log_ctx.sink_arg), level, file, line, msg);
		return;
	}
	char ts[40] = "";
	if (atomic_load_explicit(&crux_log_ctx.timestamps, memory_order_relaxed)) {
		struct timespec now;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &now);
		gmtime_r(&now.tv_sec, &tm);
		size_t k = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(ts + k, sizeof(ts) - k, ".%03ldZ ", now.tv_nsec / 1000000);
	}
	/* One fprintf call per line so lines of concurrent threads do not interleave. */
	if (crux_log_get_level() >= CRUX_LOG_DEBUG && file)
		fprintf(stderr, "%s%s[%d] %s %s:%d: %s\n", ts, crux_log_ctx.component,
			(int)getpid(), level_tag(level), file, line, msg);
	else
		fprintf(stderr, "%s%s[%d] %s: %s\n", ts, crux_log_ctx.component, (int)getpid(),
			level_tag(level), msg);
}

void crux_log_msg(enum crux_log_level level, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	crux_log_vmsg(level, file, line, fmt, ap);
	va_end(ap);
}

bool crux_log_once_key(uint64_t key)
{
	struct crux_log_ctx *c = &crux_log_ctx;
	if (key == 0)
		key = 1;
	for (unsigned i = 0; i < CRUX_LOG_ONCE_SLOTS; i++)
		if (atomic_load_explicit(&c->once_keys[i], memory_order_relaxed) == key)
			return false;
	/* Oldest key is forgotten first: memory stays bounded. */
	uint32_t slot = atomic_fetch_add(&c->once_next, 1) % CRUX_LOG_ONCE_SLOTS;
	atomic_store_explicit(&c->once_keys[slot], key, memory_order_relaxed);
	return true;
}

void crux_log_once_reset(void)
{
	for (unsigned i = 0; i < CRUX_LOG_ONCE_SLOTS; i++)
		atomic_store(&crux_log_ctx.once_keys[i], 0);
}
