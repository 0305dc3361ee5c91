// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * 8 threads map and unmap concurrently: first a churn of small mappings
 * (at most 8 x 1 MiB at once), then each maps its own large size, all meet
 * at a barrier (the combined peak: sum of the large sizes), and unmap.
 * Prints {"base_data", "peak_extra", "churn"} on stdout; the exact peak of
 * mapped memory is base_data + peak_extra. All of it happens in phase
 * "work" (the marker), which allocates and frees churn + peak_extra bytes.
 */
#include <pthread.h>

#include "common.h"
#include "memtrail_marker.h"

#define NTHREADS 8
#define CHURN 200

static pthread_barrier_t ready, at_peak, done, unmapped;

static size_t big_size(long i)
{
	return (size_t)(i + 1) * 3 * MiB;	/* 3, 6, ... 24 MiB: 108 MiB in all */
}

static void *worker(void *arg)
{
	long i = (long)arg;
	char *p;
	int k;

	pthread_barrier_wait(&ready);
	for (k = 0; k < CHURN; k++) {
		p = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			_exit(3);
		p[0] = 1;
		munmap(p, MiB);
	}
	p = mmap(NULL, big_size(i), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		_exit(3);
	pthread_barrier_wait(&at_peak);
	pthread_barrier_wait(&done);
	munmap(p, big_size(i));
	pthread_barrier_wait(&unmapped);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[NTHREADS];
	long i, base, extra = 0;

	wait_go(argc, argv);
	pthread_barrier_init(&ready, NULL, NTHREADS + 1);
	pthread_barrier_init(&at_peak, NULL, NTHREADS + 1);
	pthread_barrier_init(&done, NULL, NTHREADS + 1);
	pthread_barrier_init(&unmapped, NULL, NTHREADS + 1);
	for (i = 0; i < NTHREADS; i++) {
		if (pthread_create(&th[i], NULL, worker, (void *)i))
			return 4;
		extra += big_size(i);
	}
	/* every thread's stack is mapped now: that is part of the baseline */
	base = status_bytes("VmData");
	memtrail_phase("work");
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&at_peak);
	if (status_bytes("VmData") != base + extra)
		return 5;	/* the workload's own check of its arithmetic */
	pthread_barrier_wait(&done);
	pthread_barrier_wait(&unmapped);
	memtrail_phase("done");
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	report("{\"pid\": %d, \"base_data\": %ld, \"peak_extra\": %ld, \"churn\": %lu}\n",
	       (int)getpid(), base, extra, (unsigned long)NTHREADS * CHURN * MiB);
	_exit(0);
}
