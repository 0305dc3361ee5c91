/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The terminal, for a full-screen view: the alternate screen with the
 * cursor hidden, keys read one at a time without echo; put back as it was
 * on every way out (return, exit(), Ctrl-Z until fg, a fatal signal).
 */
#ifndef MEMTRAIL_TERM_H
#define MEMTRAIL_TERM_H

#include <signal.h>
#include <stdbool.h>

/* Set by SIGWINCH, and by SIGCONT after Ctrl-Z: draw the screen again. */
extern volatile sig_atomic_t term__resized;

/*
 * Switch stdout (a terminal) to the alternate screen, hide the cursor and,
 * when stdin is a terminal, turn off its echo and line mode so that keys
 * arrive one by one (Ctrl-C still signals). 0, or -errno.
 */
int term__open(void);
/* Put everything back as term__open found it; safe to call more than once. */
void term__close(void);
/* A key pressed since the last call, or -1; never blocks. */
int term__key(void);
/* The size of the terminal on FD; false when FD is not a terminal. */
bool term__size(int fd, unsigned *cols, unsigned *rows);

#endif
