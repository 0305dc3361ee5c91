// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Functions with C++ and Rust names, the symbols g++ and rustc emit (given
 * here by asm labels, so no C++ compiler is needed), each allocating known
 * bytes; prints its own arithmetic as one JSON line. In order:
 *   weights::load(unsigned long)  malloc WEIGHTS x WEIGHT_SIZE, kept
 *   model::step(int), model::step(long)  overloads, nothing allocated
 *   model::forward()              malloc FORWARD x FORWARD_SIZE, each freed
 *   serve::handle (Rust, legacy)  malloc HANDLE_SIZE, kept
 * No stdio before the end, so nothing else allocates on the way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEIGHTS 100
#define WEIGHT_SIZE 40000
#define FORWARD 300
#define FORWARD_SIZE 7000
#define HANDLE_SIZE 123456

void weights_load(unsigned long n) __asm__("_ZN7weights4loadEm");
void step_int(int i) __asm__("_ZN5model4stepEi");
void step_long(long i) __asm__("_ZN5model4stepEl");
void forward(void) __asm__("_ZN5model7forwardEv");
void handle(void) __asm__("_ZN5serve6handle17h0123456789abcdefE");

void *keep[WEIGHTS + 1];
void *volatile sink;
volatile long steps;

__attribute__((noinline)) void weights_load(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		keep[i] = malloc(WEIGHT_SIZE);
		memset(keep[i], 1, WEIGHT_SIZE);
	}
}

__attribute__((noinline)) void step_int(int i)
{
	steps += i;
}

__attribute__((noinline)) void step_long(long i)
{
	steps += i;
}

__attribute__((noinline)) void forward(void)
{
	for (int i = 0; i < FORWARD; i++) {
		sink = malloc(FORWARD_SIZE);
		free(sink);
	}
}

__attribute__((noinline)) void handle(void)
{
	keep[WEIGHTS] = malloc(HANDLE_SIZE);
	memset(keep[WEIGHTS], 2, HANDLE_SIZE);
}

int main(void)
{
	static char out[1024];
	int n;

	weights_load(WEIGHTS);
	step_int(1);
	step_long(2);
	forward();
	handle();
	n = snprintf(out, sizeof(out),
		"{\"weights::load(unsigned long)\": {\"kind\": \"heap\", \"alloc_bytes\": %d, "
		"\"alloc_objects\": %d, \"inuse_bytes\": %d},"
		" \"model::forward()\": {\"kind\": \"heap\", \"alloc_bytes\": %d, "
		"\"alloc_objects\": %d, \"inuse_bytes\": 0},"
		" \"serve::handle\": {\"kind\": \"heap\", \"alloc_bytes\": %d, "
		"\"alloc_objects\": 1, \"inuse_bytes\": %d}}\n",
		WEIGHTS * WEIGHT_SIZE, WEIGHTS, WEIGHTS * WEIGHT_SIZE,
		FORWARD * FORWARD_SIZE, FORWARD, HANDLE_SIZE, HANDLE_SIZE);
	if (write(1, out, n) != n)
		return 1;
	return 0;
}
