// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "array.h"
#include "reaper.h"

#define REAPERS 32

struct job {
	int fd;			/* -1: a link */
	struct bpf_link *link;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct job *jobs;
	size_t n, cap, busy;
	int threads;		/* started; -1: cannot start any */
} r = { .lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER };

static void run(const struct job *j)
{
	if (j->link)
		bpf_link__destroy(j->link);
	else if (j->fd >= 0)
		close(j->fd);
}

static void *reaper(void *arg)
{
	struct job j;

	(void)arg;
	pthread_mutex_lock(&r.lock);
	for (;;) {
		while (!r.n)
			pthread_cond_wait(&r.work, &r.lock);
		j = r.jobs[--r.n];
		r.busy++;
		pthread_mutex_unlock(&r.lock);
		run(&j);
		pthread_mutex_lock(&r.lock);
		if (!--r.busy && !r.n)
			pthread_cond_broadcast(&r.idle);
	}
	return NULL;
}

/* With the lock held, a job to add: threads up to REAPERS, one per job waiting or running. */
static void start_threads(void)
{
	pthread_attr_t a;
	pthread_t tid;
	sigset_t all, old;

	if (r.threads < 0 || (size_t)r.threads >= REAPERS || (size_t)r.threads > r.n + r.busy)
		return;
	/* signals stay with the main thread: its loop stops on Ctrl-C */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 * 1024);
	if (pthread_create(&tid, &a, reaper, NULL))
		r.threads = r.threads ? r.threads : -1;
	else
		r.threads++;
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void hand_over(struct job j)
{
	pthread_mutex_lock(&r.lock);
	start_threads();
	if (r.threads <= 0 ||
	    array__grow((void **)&r.jobs, &r.cap, r.n + 1, sizeof(*r.jobs))) {
		pthread_mutex_unlock(&r.lock);
		run(&j);	/* no thread, or no memory: here and now */
		return;
	}
	r.jobs[r.n++] = j;
	pthread_cond_signal(&r.work);
	pthread_mutex_unlock(&r.lock);
}

void reaper__close(int fd)
{
	if (fd >= 0)
		hand_over((struct job){ .fd = fd });
}

void reaper__destroy_link(struct bpf_link *link)
{
	if (link)
		hand_over((struct job){ .fd = -1, .link = link });
}

void reaper__drain(void)
{
	pthread_mutex_lock(&r.lock);
	while (r.n || r.busy)
		pthread_cond_wait(&r.idle, &r.lock);
	pthread_mutex_unlock(&r.lock);
}
