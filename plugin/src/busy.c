/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Busy time of the plugin: the union over all connections of the time during
 * which at least one send or receive is posted and not yet reported complete
 * (NCCL waits on inter-host transfers). On the data path only an atomic
 * counter per post and per completion; the clock is read and a lock taken
 * only when the count leaves or returns to zero. The publisher samples the
 * cumulative figure once per publish interval into a ring and reports the
 * busy time over the last CRUX_BUSY_PERIOD (see crux/profile.h, v5).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "busy.h"
#include "crux/clock.h"

#define BUSY_SAMPLES 128

struct busy_sample {
	uint64_t t;
	uint64_t total;
};

static struct {
	_Atomic int64_t inflight;
	pthread_mutex_t lock;
	bool open;
	uint64_t since;	   /* start of the open busy interval */
	uint64_t total;	   /* closed busy intervals, ns */
	uint64_t reported; /* the largest cumulative figure handed out: they never decrease */
	/* publisher only */
	struct busy_sample ring[BUSY_SAMPLES];
	unsigned head, count;
	/* the history published for readers: at least period / CRUX_PROF_BUSY_SAMPLES apart */
	struct crux_prof_busy_sample hist[CRUX_PROF_BUSY_SAMPLES];
	unsigned hhead, hcount;
} B = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The count crossed 0 -> 1: open the interval (only now is the clock read). */
static void busy_open(uint64_t now)
{
	pthread_mutex_lock(&B.lock);
	/* a completion that raced us may have left it open; it stays one interval */
	if (atomic_load_explicit(&B.inflight, memory_order_acquire) > 0 && !B.open) {
		B.open = true;
		B.since = now;
	}
	pthread_mutex_unlock(&B.lock);
}

/* The count crossed 1 -> 0: close the interval. */
static void busy_close(uint64_t now)
{
	pthread_mutex_lock(&B.lock);
	/* a post that raced us keeps the interval open */
	if (atomic_load_explicit(&B.inflight, memory_order_acquire) == 0 && B.open) {
		B.total += now > B.since ? now - B.since : 0;
		B.open = false;
	}
	pthread_mutex_unlock(&B.lock);
}

static bool busy_up(void)
{
	return atomic_fetch_add_explicit(&B.inflight, 1, memory_order_acq_rel) == 0;
}

static bool busy_down(void)
{
	return atomic_fetch_sub_explicit(&B.inflight, 1, memory_order_acq_rel) == 1;
}

void cruxn_busy_begin_at(uint64_t now)
{
	if (busy_up())
		busy_open(now);
}

void cruxn_busy_end_at(uint64_t now)
{
	if (busy_down())
		busy_close(now);
}

/* The data path's calls: one atomic per post and per completion; the clock
 * and the lock only where the count crosses zero. */
void cruxn_busy_begin(void)
{
	if (busy_up())
		busy_open(crux_now_ns());
}

void cruxn_busy_end(void)
{
	if (busy_down())
		busy_close(crux_now_ns());
}

uint64_t cruxn_busy_total_at(uint64_t now)
{
	uint64_t t;

	pthread_mutex_lock(&B.lock);
	t = B.total + (B.open && now > B.since ? now - B.since : 0);
	/*
	 * An interval closed with a clock reading taken before an earlier
	 * sample's would make the figure go back: readers must never see that.
	 */
	if (t < B.reported)
		t = B.reported;
	B.reported = t;
	pthread_mutex_unlock(&B.lock);
	return t;
}

void cruxn_busy_sample(uint64_t now, uint64_t period_ns, uint64_t *total, uint64_t *window,
		       uint64_t *in_window)
{
	uint64_t tot = cruxn_busy_total_at(now);
	const struct busy_sample *from = NULL;

	/* the newest sample at least one period old, else the oldest there is */
	for (unsigned i = 0; i < B.count; i++) {
		const struct busy_sample *s =
		    &B.ring[(B.head + BUSY_SAMPLES - 1 - i) % BUSY_SAMPLES];
		if (s->t > now || s->total > tot)
			break; /* not ours: a reset (tests) */
		from = s;
		if (now - s->t >= period_ns)
			break;
	}
	*total = tot;
	*window = from ? now - from->t : 0;
	*in_window = from ? tot - from->total : 0;
	if (*in_window > *window)
		*in_window = *window;
	B.ring[B.head] = (struct busy_sample){now, tot};
	B.head = (B.head + 1) % BUSY_SAMPLES;
	if (B.count < BUSY_SAMPLES)
		B.count++;
}

void cruxn_busy_publish(uint64_t now, uint64_t period_ns, struct crux_prof_net *net)
{
	uint64_t spacing = period_ns / CRUX_PROF_BUSY_SAMPLES;
	unsigned last = (B.hhead + CRUX_PROF_BUSY_SAMPLES - 1) % CRUX_PROF_BUSY_SAMPLES;

	cruxn_busy_sample(now, period_ns, &net->busy_ns, &net->busy_window_ns,
			  &net->busy_period_ns);
	if (B.hcount && B.hist[last].t_ns > now)
		B.hcount = 0; /* not ours: a reset (tests) */
	if (!B.hcount || now - B.hist[last].t_ns >= spacing) {
		B.hist[B.hhead] = (struct crux_prof_busy_sample){now, net->busy_ns};
		B.hhead = (B.hhead + 1) % CRUX_PROF_BUSY_SAMPLES;
		if (B.hcount < CRUX_PROF_BUSY_SAMPLES)
			B.hcount++;
	}
	/* oldest first, then this moment (the newest is never older than the publish) */
	net->nbusy_hist = 0;
	for (unsigned i = 0; i < B.hcount; i++) {
		unsigned k =
		    (B.hhead + CRUX_PROF_BUSY_SAMPLES - B.hcount + i) % CRUX_PROF_BUSY_SAMPLES;
		net->busy_hist[net->nbusy_hist++] = B.hist[k];
	}
	if (net->nbusy_hist && net->busy_hist[net->nbusy_hist - 1].t_ns != now) {
		if (net->nbusy_hist == CRUX_PROF_BUSY_SAMPLES) {
			memmove(net->busy_hist, net->busy_hist + 1,
				(CRUX_PROF_BUSY_SAMPLES - 1) * sizeof(net->busy_hist[0]));
			net->nbusy_hist--;
		}
		net->busy_hist[net->nbusy_hist++] =
		    (struct crux_prof_busy_sample){now, net->busy_ns};
	}
}

void cruxn_busy_reset(void)
{
	pthread_mutex_lock(&B.lock);
	atomic_store(&B.inflight, 0);
	B.open = false;
	B.since = B.total = B.reported = 0;
	memset(B.ring, 0, sizeof(B.ring));
	B.head = B.count = 0;
	B.hhead = B.hcount = 0;
	pthread_mutex_unlock(&B.lock);
}

void cruxn_busy_req_begin(bool *flag)
{
	if (*flag)
		return;
	*flag = true;
	cruxn_busy_begin();
}

void cruxn_busy_req_end(bool *flag)
{
	if (!*flag)
		return;
	*flag = false;
	cruxn_busy_end();
}
