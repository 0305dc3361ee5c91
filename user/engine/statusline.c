// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdio.h>
#include <unistd.h>

#include "log.h"
#include "statusline.h"
#include "term.h"

#define PERIOD_MS 1000

static struct {
	bool on;		/* stderr is a terminal and the command wants the line */
	bool shown;		/* the line is on the screen */
	uint64_t next_ms;	/* the next redraw */
} st;

void statusline__start(bool wanted)
{
	st.on = wanted && isatty(STDERR_FILENO);
	st.shown = false;
	st.next_ms = 0;
	if (st.on)
		log__set_before(statusline__clear);
}

void statusline__tick(struct session *s)
{
	uint64_t now = session__now_ms(s), lost[MEMTRAIL_LOST_MAX], total = 0, sec;
	unsigned cols = 80, rows;
	char line[256];
	int k, n;

	if (!st.on || now < st.next_ms)
		return;
	st.next_ms = now + PERIOD_MS;
	tracer__lost(s->tracer, lost);
	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		total += lost[k];
	sec = now / 1000;
	n = snprintf(line, sizeof(line), "memtrail: %llu:%02u:%02u elapsed, %zu target%s, "
		     "%llu event%s, %llu lost", (unsigned long long)(sec / 3600),
		     (unsigned)(sec / 60 % 60), (unsigned)(sec % 60), s->live,
		     s->live == 1 ? "" : "s", (unsigned long long)s->events,
		     s->events == 1 ? "" : "s", (unsigned long long)total);
	/* a line that wrapped could not be rewritten in place by \r */
	term__size(STDERR_FILENO, &cols, &rows);
	if (n > 0 && (unsigned)n >= cols)
		line[cols > 1 ? cols - 1 : 0] = '\0';
	fprintf(stderr, "\r%s\x1b[K", line);
	st.shown = true;
}

void statusline__clear(void)
{
	if (!st.shown)
		return;
	fputs("\r\x1b[K", stderr);
	st.shown = false;
}

void statusline__stop(void)
{
	statusline__clear();
	if (st.on)
		log__set_before(NULL);
	st.on = false;
}
