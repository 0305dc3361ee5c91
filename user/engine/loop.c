// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <string.h>

#include "log.h"
#include "loop.h"
#include "statusline.h"

int loop__run(struct session *s, const struct loop_hooks *h, void *ctx)
{
	uint64_t next_sample = 0, next_scan = h->scan_ms;
	int ret = 0;

	while (!ret && !(h->until_signal && session__stop_signal)) {
		uint64_t now;

		if (tracer__poll(s->tracer, LOOP_POLL_MS) < 0 && !session__stop_signal) {
			log__error("cannot read BPF events: %s", strerror(errno));
			return -EIO;
		}
		now = session__now_ms(s);
		if (now >= next_sample) {
			session__sample_all(s, now);
			next_sample = now + h->interval_ms;
			if (h->sampled)
				ret = h->sampled(ctx, now);
			if (ret)
				break;
		}
		if (h->scan_ms && now >= next_scan) {
			tracer__scan(s->tracer);	/* processes moved into a watched cgroup */
			next_scan = now + h->scan_ms;
		}
		session__tick(s, now);
		if (h->status)
			statusline__tick(s);
		if (h->turn)
			ret = h->turn(ctx, now);
	}
	return ret < 0 ? ret : 0;
}
