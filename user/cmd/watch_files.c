// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail watch's files: written atomically, mode 0600, into the output
 * folder; kept in memory (at most --pending) while it cannot be written.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "outfile.h"
#include "trail.h"
#include "watch_int.h"

void watch_utc_stamp(char *buf, size_t len, bool for_file)
{
	struct timespec ts;
	struct tm tm;
	char base[40];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), for_file ? "%Y%m%dT%H%M%S" : "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.31s.%03dZ", base, (int)(ts.tv_nsec / 1000000) % 1000);
}

static int write_one(struct watch *w, const struct pending *p)
{
	char path[PATH_MAX];
	int err;

	if (snprintf(path, sizeof(path), "%s/%s", w->o->dir, p->name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	err = trail__write_json(p->doc, path);
	if (err == -ENOENT && !mkdir(w->o->dir, 0700))
		err = trail__write_json(p->doc, path);	/* the dir was removed */
	return err;
}

/* Write what waits, oldest first; stop at the first failure. */
void watch_flush_pending(struct watch *w)
{
	size_t done = 0;
	int err = 0;

	while (done < w->n_pend) {
		err = write_one(w, &w->pend[done]);
		if (err)
			break;
		log__info("wrote '%s/%s'", w->o->dir, w->pend[done].name);
		free(w->pend[done].name);
		json_decref(w->pend[done].doc);
		done++;
	}
	if (done) {
		memmove(w->pend, w->pend + done, (w->n_pend - done) * sizeof(*w->pend));
		w->n_pend -= done;
	}
	if (err && !w->failing)
		log__error("cannot write '%s/%s': %s; kept in memory (%zu waiting, at most %u), "
			   "retrying every second", w->o->dir, w->pend[0].name, strerror(-err),
			   w->n_pend, w->o->pending);
	else if (!err && w->failing)
		log__info("'%s' is writable again: every kept file is written", w->o->dir);
	w->failing = err != 0;
}

/* Queue DOC (taking its reference) as DIR/NAME and write what can be written. */
void watch_emit(struct watch *w, const char *name, json_t *doc)
{
	if (!doc) {
		w->dropped++;
		log__error("out of memory: '%s' is lost", name);
		return;
	}
	if (w->n_pend == w->o->pending) {
		log__error("too many files waiting to be written: '%s' is dropped",
			   w->pend[0].name);
		free(w->pend[0].name);
		json_decref(w->pend[0].doc);
		memmove(w->pend, w->pend + 1, (w->n_pend - 1) * sizeof(*w->pend));
		w->n_pend--;
		w->dropped++;
	}
	w->pend[w->n_pend].name = strdup(name);
	w->pend[w->n_pend].doc = doc;
	if (!w->pend[w->n_pend].name) {
		json_decref(doc);
		w->dropped++;
		return;
	}
	w->n_pend++;
	watch_flush_pending(w);
}

/*
 * The output directory exists (made 0700 when missing) and takes a file. A
 * symbolic link there is followed only when it is memtrail's user's or
 * root's: one someone else planted (a folder shared with a container) would
 * send root's files where they chose.
 */
int watch_check_dir(const char *dir)
{
	char probe[PATH_MAX];
	struct stat st;
	int err;

	if (!lstat(dir, &st) && S_ISLNK(st.st_mode) && st.st_uid && st.st_uid != geteuid()) {
		log__error("snapshot directory '%s' is a symbolic link of user %u, not followed: "
			   "give the folder it names", dir, st.st_uid);
		return -1;
	}
	if (mkdir(dir, 0700) && errno != EEXIST) {
		log__error("cannot create snapshot directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		log__error("snapshot directory '%s' is not a directory", dir);
		return -1;
	}
	if (snprintf(probe, sizeof(probe), "%s/.memtrail-probe", dir) >= (int)sizeof(probe))
		err = -ENAMETOOLONG;
	else
		err = outfile__probe(probe);
	if (err) {
		log__error("cannot write to snapshot directory '%s': %s", dir, strerror(-err));
		return -1;
	}
	return 0;
}
