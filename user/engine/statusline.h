/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A one-line status on stderr for long record and watch runs: elapsed time,
 * live targets, events handled, events lost; rewritten in place once a
 * second. Only when stderr is a terminal: captured stderr never sees it.
 * Log lines clear it first; it is redrawn at the next second.
 */
#ifndef MEMTRAIL_STATUSLINE_H
#define MEMTRAIL_STATUSLINE_H

#include <stdbool.h>

#include "session.h"

/* Show the line from now on when WANTED and stderr is a terminal. */
void statusline__start(bool wanted);
/* Redraw it from S when a second has passed since the last time. */
void statusline__tick(struct session *s);
/* Erase it (before something else is printed); the next tick draws it again. */
void statusline__clear(void);
/* Erase it for good. */
void statusline__stop(void);

#endif
