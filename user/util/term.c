// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "term.h"

/* alternate screen on, cursor hidden; and back */
static const char enter_seq[] = "\x1b[?1049h\x1b[?25l";
static const char leave_seq[] = "\x1b[?25h\x1b[?1049l";

volatile sig_atomic_t term__resized;

static struct termios saved, raw;
static bool keys;			/* stdin is a terminal: its modes are ours to restore */
static volatile sig_atomic_t opened;	/* between term__open and term__close */
static volatile sig_atomic_t on_screen;	/* the alternate screen is shown */
static bool exit_hook;

static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
#define N_FATAL (sizeof(fatal) / sizeof(fatal[0]))
static struct sigaction old_fatal[N_FATAL], old_tstp, old_cont, old_winch;

/* Everything below runs in signal handlers too: write() and tcsetattr() only. */
static void write_all(const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(STDOUT_FILENO, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= w;
	}
}

static void show(void)
{
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	write_all(enter_seq, sizeof(enter_seq) - 1);
	on_screen = 1;
}

static void hide(void)
{
	if (!on_screen)
		return;
	on_screen = 0;
	write_all(leave_seq, sizeof(leave_seq) - 1);
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
}

static void on_winch(int sig)
{
	(void)sig;
	term__resized = 1;
}

static void on_tstp(int sig)
{
	int e = errno;

	/* give the shell its terminal back, then stop as SIGTSTP would */
	hide();
	signal(sig, SIG_DFL);
	raise(sig);	/* delivered, and stops us, once this handler returns */
	errno = e;
}

static void on_cont(int sig)
{
	struct sigaction sa = { .sa_handler = on_tstp };
	int e = errno;

	(void)sig;
	if (opened && !on_screen) {
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTSTP, &sa, NULL);
		show();
	}
	term__resized = 1;
	errno = e;
}

static void on_fatal(int sig)
{
	/* SA_RESETHAND: the signal's own action follows, after the terminal is back */
	hide();
	raise(sig);
}

static void at_exit(void)
{
	hide();
}

int term__open(void)
{
	struct sigaction sa = { 0 };
	size_t i;

	if (!isatty(STDOUT_FILENO))
		return -ENOTTY;
	keys = isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &saved);
	if (keys) {
		raw = saved;
		raw.c_lflag &= ~(ECHO | ICANON);	/* ISIG stays: Ctrl-C, Ctrl-Z */
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
	}
	if (!exit_hook && !atexit(at_exit))
		exit_hook = true;
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, &old_winch);
	sa.sa_handler = on_tstp;
	sigaction(SIGTSTP, &sa, &old_tstp);
	sa.sa_handler = on_cont;
	sigaction(SIGCONT, &sa, &old_cont);
	sa.sa_handler = on_fatal;
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	for (i = 0; i < N_FATAL; i++)
		sigaction(fatal[i], &sa, &old_fatal[i]);
	opened = 1;
	show();
	term__resized = 0;
	return 0;
}

void term__close(void)
{
	size_t i;

	if (!opened)
		return;
	opened = 0;
	hide();
	sigaction(SIGWINCH, &old_winch, NULL);
	sigaction(SIGTSTP, &old_tstp, NULL);
	sigaction(SIGCONT, &old_cont, NULL);
	for (i = 0; i < N_FATAL; i++)
		sigaction(fatal[i], &old_fatal[i], NULL);
}

int term__key(void)
{
	unsigned char c;

	if (!keys || !on_screen || read(STDIN_FILENO, &c, 1) != 1)
		return -1;
	return c;
}

bool term__size(int fd, unsigned *cols, unsigned *rows)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) || !ws.ws_col)
		return false;
	*cols = ws.ws_col;
	*rows = ws.ws_row;
	return true;
}
