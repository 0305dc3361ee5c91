// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The deep workload's C++ twin, for --unwind dwarf: built -O2
 * -fomit-frame-pointer. Three allocations by operator new, each of its own
 * size at the end of a chain 12 calls deep through a class template's
 * member functions: in the main thread, in a std::thread, and inside a
 * catch block (the chain goes on after an exception unwound part of it).
 * The allocating function asks glibc's backtrace() for its own chain.
 * Prints, once they are made and kept:
 *   {"allocs": [{"where": W, "size": N, "frames": ["0x...", ...]}, ...]}
 * (backtrace()'s return addresses above the allocating function), then
 * waits for a line (or the end) of its input and exits.
 */
#include <execinfo.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")

namespace deep {

struct Seen {
	std::string where;
	size_t size;
	void *frames[64];
	int n;
	char *block;
};

static Seen seen[3];
static int n_seen;

NOINLINE void alloc_here(size_t size, const char *where)
{
	Seen &s = seen[n_seen++];

	s.block = new char[size];
	std::memset(s.block, 1, size);
	s.where = where;
	s.size = size;
	s.n = backtrace(s.frames, 64);
	KEEP();
}

template <typename T> struct Layer {
	T tag;
	NOINLINE void down(int depth, size_t size, const char *where)
	{
		if (depth > 1)
			down(depth - 1, size, where);
		else
			alloc_here(size, where);
		KEEP();
	}
};

NOINLINE void after_throw(size_t size)
{
	try {
		throw std::runtime_error("unwound");
	} catch (const std::exception &) {
		Layer<long> l{ 3 };
		l.down(12, size, "catch");
	}
	KEEP();
}

}  // namespace deep

int main()
{
	deep::Layer<int> a{ 1 };
	a.down(12, 110000, "main");
	std::thread t([] {
		deep::Layer<double> b{ 2.0 };
		b.down(12, 210000, "thread");
	});
	t.join();
	deep::after_throw(310000);
	std::printf("{\"allocs\": [");
	for (int i = 0; i < deep::n_seen; i++) {
		std::printf("%s{\"where\": \"%s\", \"size\": %zu, \"frames\": [", i ? ", " : "",
			    deep::seen[i].where.c_str(), deep::seen[i].size);
		for (int j = 1; j < deep::seen[i].n; j++)
			std::printf("%s\"%p\"", j > 1 ? ", " : "", deep::seen[i].frames[j]);
		std::printf("]}");
	}
	std::printf("]}\n");
	std::fflush(stdout);
	int c;
	while ((c = std::getchar()) != EOF && c != '\n')
		;
	return 0;
}
