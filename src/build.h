/*
 * build.h - what build.c lends merge.c: threads that each take a run of whole segments of a
 * segmented table, and the shadow filters through which each writes its own (build.c says
 * why segments are independent, and why neighbouring ones are never written at once).
 */
#ifndef CF_BUILD_H
#define CF_BUILD_H

#include "plain.h"

/* Threads a build or a merge starts at most: far more than the cores it pays to use. */
#define CF__BUILD_THREADS_MAX 256u

/* Threads to use for `want` (0: one per online processor), at most one per `per` items
 * of n, and at least one. */
CF__HIDDEN unsigned cf__threads_for(unsigned want, size_t n, size_t per);

/* Starts worker(jobs[i]) on a thread of its own for i in [1, n), runs jobs[0] here, and
 * waits for them all; a job whose thread could not start runs here too. */
CF__HIDDEN void cf__run_jobs(void *(*worker)(void *), void *jobs, size_t size, unsigned n);

/* A filter with f's settings, fixed, over f's first table (which it must never free),
 * with its stash's memory and the search memory of its own its evictions may take already
 * made: its thread then allocates nothing (f's allocator need not be thread-safe). An add
 * that finds no room in it changes no table, only its stash. */
CF__HIDDEN cf_status cf__shadow_of(const cf_filter *f, cf_filter **out);
CF__HIDDEN void cf__shadow_free(cf_filter *s);

#endif
