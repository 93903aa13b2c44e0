/* SPDX-License-Identifier: BSD-3-Clause */
/* A counting librpmem.so.1: every one of the 12 functions forwards to the
 * real library, and the data-path calls (persist, deep persist, flush, drain,
 * read) are counted, with their bytes and a histogram of their sizes.
 *
 * It is built as librpmem.so.1 in a directory of its own; put that directory
 * first in LD_LIBRARY_PATH and a program that dlopens librpmem.so.1 (Debian's
 * libpmemobj and libpmempool do) loads it instead of the real one, which it
 * dlopens by absolute path: $RPMEM_COUNT_REAL_LIB, else the path it was built
 * with (RPMEM_COUNT_DEFAULT_REAL_LIB). Nothing is changed on the way.
 *
 * A program reads the counters with dlopen("librpmem.so.1", RTLD_NOLOAD) and
 * dlsym(handle, "rpmem_count_snapshot"); with RPMEM_COUNT_REPORT=1 the totals
 * are also printed on stderr at exit. */
#define _GNU_SOURCE
#include "tools/rpmem-obj-bench/rpmem_count.h"

#include <dlfcn.h>
#include <errno.h>
#include <librpmem.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef RPMEM_COUNT_DEFAULT_REAL_LIB
#error "RPMEM_COUNT_DEFAULT_REAL_LIB must name the real librpmem.so.1"
#endif

#define EXPORT __attribute__((visibility("default")))

static struct {
  RPMEMpool *(*create)(const char *, const char *, void *, size_t, unsigned *,
                       const struct rpmem_pool_attr *);
  RPMEMpool *(*open)(const char *, const char *, void *, size_t, unsigned *,
                     struct rpmem_pool_attr *);
  int (*set_attr)(RPMEMpool *, const struct rpmem_pool_attr *);
  int (*close)(RPMEMpool *);
  int (*remove)(const char *, const char *, int);
  int (*flush)(RPMEMpool *, size_t, size_t, unsigned, unsigned);
  int (*drain)(RPMEMpool *, unsigned, unsigned);
  int (*persist)(RPMEMpool *, size_t, size_t, unsigned, unsigned);
  int (*deep_persist)(RPMEMpool *, size_t, size_t, unsigned);
  int (*read)(RPMEMpool *, void *, size_t, size_t, unsigned);
  const char *(*check_version)(unsigned, unsigned);
  const char *(*errormsg)(void);
} real;

static char real_path[4096];
static const char *load_error;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint64_t calls[RPMEM_COUNT_NKINDS];
static uint64_t bytes[RPMEM_COUNT_NKINDS];
static uint64_t hist[RPMEM_COUNT_NKINDS][RPMEM_COUNT_NBUCKETS];
static unsigned lanes_asked, lanes_granted, pools_opened;

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p && !load_error) load_error = "a function is missing from the real librpmem.so.1";
  return p;
}

static void load(void) {
  const char *path = getenv("RPMEM_COUNT_REAL_LIB");
  if (!path || !*path) path = RPMEM_COUNT_DEFAULT_REAL_LIB;
  snprintf(real_path, sizeof(real_path), "%s", path);
  void *h = dlopen(real_path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    load_error = "cannot load the real librpmem.so.1";
    fprintf(stderr, "rpmem_count: %s: %s\n", real_path, dlerror());
    return;
  }
  *(void **)&real.create = sym(h, "rpmem_create");
  *(void **)&real.open = sym(h, "rpmem_open");
  *(void **)&real.set_attr = sym(h, "rpmem_set_attr");
  *(void **)&real.close = sym(h, "rpmem_close");
  *(void **)&real.remove = sym(h, "rpmem_remove");
  *(void **)&real.flush = sym(h, "rpmem_flush");
  *(void **)&real.drain = sym(h, "rpmem_drain");
  *(void **)&real.persist = sym(h, "rpmem_persist");
  *(void **)&real.deep_persist = sym(h, "rpmem_deep_persist");
  *(void **)&real.read = sym(h, "rpmem_read");
  *(void **)&real.check_version = sym(h, "rpmem_check_version");
  *(void **)&real.errormsg = sym(h, "rpmem_errormsg");
}

/* 0 when the real library is there; otherwise errno is set. */
static int ready(void) {
  pthread_once(&once, load);
  if (load_error) {
    errno = ENOSYS;
    return -1;
  }
  return 0;
}

static unsigned bucket_of(size_t n) {
  unsigned b = 0;
  while (b + 1 < RPMEM_COUNT_NBUCKETS && ((size_t)1 << b) < n) ++b;
  return b;
}

static void count(enum rpmem_count_kind k, size_t n) {
  __atomic_fetch_add(&calls[k], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&bytes[k], n, __ATOMIC_RELAXED);
  __atomic_fetch_add(&hist[k][bucket_of(n)], 1, __ATOMIC_RELAXED);
}

static void note_lanes(unsigned asked, const unsigned *nlanes, const RPMEMpool *rpp) {
  if (!rpp) return;
  __atomic_store_n(&lanes_asked, asked, __ATOMIC_RELAXED);
  __atomic_store_n(&lanes_granted, *nlanes, __ATOMIC_RELAXED);
  __atomic_fetch_add(&pools_opened, 1, __ATOMIC_RELAXED);
}

EXPORT void rpmem_count_snapshot(struct rpmem_count *out) {
  memset(out, 0, sizeof(*out));
  for (int k = 0; k < RPMEM_COUNT_NKINDS; ++k) {
    out->calls[k] = __atomic_load_n(&calls[k], __ATOMIC_RELAXED);
    out->bytes[k] = __atomic_load_n(&bytes[k], __ATOMIC_RELAXED);
    for (int b = 0; b < RPMEM_COUNT_NBUCKETS; ++b)
      out->hist[k][b] = __atomic_load_n(&hist[k][b], __ATOMIC_RELAXED);
  }
  out->lanes_asked = __atomic_load_n(&lanes_asked, __ATOMIC_RELAXED);
  out->lanes_granted = __atomic_load_n(&lanes_granted, __ATOMIC_RELAXED);
  out->pools_opened = __atomic_load_n(&pools_opened, __ATOMIC_RELAXED);
  pthread_once(&once, load);
  snprintf(out->real_lib, sizeof(out->real_lib), "%s", real_path);
}

EXPORT RPMEMpool *rpmem_create(const char *target, const char *pool_set_name, void *pool_addr,
                               size_t pool_size, unsigned *nlanes,
                               const struct rpmem_pool_attr *create_attr) {
  if (ready()) return NULL;
  unsigned asked = nlanes ? *nlanes : 0;
  RPMEMpool *rpp = real.create(target, pool_set_name, pool_addr, pool_size, nlanes, create_attr);
  note_lanes(asked, nlanes, rpp);
  return rpp;
}

EXPORT RPMEMpool *rpmem_open(const char *target, const char *pool_set_name, void *pool_addr,
                             size_t pool_size, unsigned *nlanes,
                             struct rpmem_pool_attr *open_attr) {
  if (ready()) return NULL;
  unsigned asked = nlanes ? *nlanes : 0;
  RPMEMpool *rpp = real.open(target, pool_set_name, pool_addr, pool_size, nlanes, open_attr);
  note_lanes(asked, nlanes, rpp);
  return rpp;
}

EXPORT int rpmem_set_attr(RPMEMpool *rpp, const struct rpmem_pool_attr *attr) {
  return ready() ? -1 : real.set_attr(rpp, attr);
}

EXPORT int rpmem_close(RPMEMpool *rpp) { return ready() ? -1 : real.close(rpp); }

EXPORT int rpmem_remove(const char *target, const char *pool_set, int flags) {
  return ready() ? -1 : real.remove(target, pool_set, flags);
}

EXPORT int rpmem_flush(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane,
                       unsigned flags) {
  if (ready()) return -1;
  count(RPMEM_COUNT_FLUSH, length);
  return real.flush(rpp, offset, length, lane, flags);
}

EXPORT int rpmem_drain(RPMEMpool *rpp, unsigned lane, unsigned flags) {
  if (ready()) return -1;
  count(RPMEM_COUNT_DRAIN, 0);
  return real.drain(rpp, lane, flags);
}

EXPORT int rpmem_persist(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane,
                         unsigned flags) {
  if (ready()) return -1;
  count(flags & RPMEM_PERSIST_RELAXED ? RPMEM_COUNT_PERSIST_RELAXED : RPMEM_COUNT_PERSIST, length);
  return real.persist(rpp, offset, length, lane, flags);
}

EXPORT int rpmem_deep_persist(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane) {
  if (ready()) return -1;
  count(RPMEM_COUNT_DEEP_PERSIST, length);
  return real.deep_persist(rpp, offset, length, lane);
}

EXPORT int rpmem_read(RPMEMpool *rpp, void *buff, size_t offset, size_t length, unsigned lane) {
  if (ready()) return -1;
  count(RPMEM_COUNT_READ, length);
  return real.read(rpp, buff, offset, length, lane);
}

EXPORT const char *rpmem_check_version(unsigned major_required, unsigned minor_required) {
  if (ready()) return load_error;
  return real.check_version(major_required, minor_required);
}

EXPORT const char *rpmem_errormsg(void) {
  if (ready()) return load_error;
  return real.errormsg();
}

__attribute__((destructor)) static void report(void) {
  const char *r = getenv("RPMEM_COUNT_REPORT");
  if (!r || strcmp(r, "1") != 0) return;
  fprintf(stderr, "rpmem_count: %s; lanes asked %u, granted %u\n", real_path, lanes_asked,
          lanes_granted);
  for (int k = 0; k < RPMEM_COUNT_NKINDS; ++k) {
    if (!calls[k]) continue;
    fprintf(stderr, "rpmem_count: %-16s %10llu calls %14llu bytes  sizes",
            rpmem_count_kind_name((enum rpmem_count_kind)k), (unsigned long long)calls[k],
            (unsigned long long)bytes[k]);
    for (int b = 0; b < RPMEM_COUNT_NBUCKETS; ++b)
      if (hist[k][b]) fprintf(stderr, " <=%llu:%llu", 1ull << b, (unsigned long long)hist[k][b]);
    fprintf(stderr, "\n");
  }
}
