// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>

#include "pidmap.h"

/* PIDs are dense and sequential: murmur3's finalizer spreads neighbours. */
static size_t slot_of(const struct pidmap *m, uint32_t pid)
{
	uint32_t h = pid;

	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h & (m->cap - 1);
}

bool pidmap__get(const struct pidmap *m, uint32_t pid, size_t *index)
{
	size_t i;

	if (!m->n)
		return false;
	for (i = slot_of(m, pid); m->slots[i].val; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].pid == pid) {
			*index = m->slots[i].val - 1;
			return true;
		}
	}
	return false;
}

static void insert(struct pidmap *m, uint32_t pid, uint32_t val)
{
	size_t i;

	for (i = slot_of(m, pid); m->slots[i].val; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].pid == pid) {
			m->slots[i].val = val;
			return;
		}
	}
	m->slots[i] = (struct pidmap_slot){ pid, val };
	m->n++;
}

static int grow(struct pidmap *m)
{
	struct pidmap old = *m;
	size_t i;

	m->cap = old.cap ? old.cap * 2 : 64;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -ENOMEM;
	}
	m->n = 0;
	for (i = 0; i < old.cap; i++)
		if (old.slots[i].val)
			insert(m, old.slots[i].pid, old.slots[i].val);
	free(old.slots);
	return 0;
}

int pidmap__put(struct pidmap *m, uint32_t pid, size_t index)
{
	if (index >= UINT32_MAX)
		return -ENOMEM;
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return -ENOMEM;
	insert(m, pid, (uint32_t)index + 1);
	return 0;
}

void pidmap__del(struct pidmap *m, uint32_t pid)
{
	size_t mask = m->cap - 1, i, j;

	if (!m->n)
		return;
	for (i = slot_of(m, pid); m->slots[i].pid != pid; i = (i + 1) & mask)
		if (!m->slots[i].val)
			return;
	if (!m->slots[i].val)
		return;
	/* backward shift: pull up later entries of the run that may sit in I's place */
	for (j = (i + 1) & mask; m->slots[j].val; j = (j + 1) & mask) {
		size_t home = slot_of(m, m->slots[j].pid);

		/* J may move to I unless its home lies cyclically in (I, J] */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		m->slots[i] = m->slots[j];
		i = j;
	}
	m->slots[i].val = 0;
	m->n--;
}

void pidmap__free(struct pidmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->n = 0;
}
