/* SPDX-License-Identifier: BSD-3-Clause */
/* The counters of the counting librpmem.so.1 (rpmem_count.c). */
#ifndef RPMEM_TOOLS_RPMEM_OBJ_BENCH_RPMEM_COUNT_H
#define RPMEM_TOOLS_RPMEM_OBJ_BENCH_RPMEM_COUNT_H

#include <stdint.h>

enum rpmem_count_kind {
  RPMEM_COUNT_PERSIST,         /* rpmem_persist, flags 0 */
  RPMEM_COUNT_PERSIST_RELAXED, /* rpmem_persist, RPMEM_PERSIST_RELAXED */
  RPMEM_COUNT_DEEP_PERSIST,
  RPMEM_COUNT_FLUSH,
  RPMEM_COUNT_DRAIN, /* counted with 0 bytes */
  RPMEM_COUNT_READ,
  RPMEM_COUNT_NKINDS
};

/* Bucket b counts calls of at most 2^b bytes (and more than 2^(b-1)); the
 * last one also everything larger. */
#define RPMEM_COUNT_NBUCKETS 32

struct rpmem_count {
  uint64_t calls[RPMEM_COUNT_NKINDS];
  uint64_t bytes[RPMEM_COUNT_NKINDS];
  uint64_t hist[RPMEM_COUNT_NKINDS][RPMEM_COUNT_NBUCKETS];
  unsigned lanes_asked;   /* *nlanes passed to the last successful create/open */
  unsigned lanes_granted; /* *nlanes it returned */
  unsigned pools_opened;  /* successful creates and opens */
  char real_lib[4096];    /* the librpmem.so.1 calls are forwarded to */
};

/* Exported by the counting library, looked up with dlsym. */
typedef void (*rpmem_count_snapshot_fn)(struct rpmem_count *out);

static inline const char *rpmem_count_kind_name(enum rpmem_count_kind k) {
  static const char *const names[RPMEM_COUNT_NKINDS] = {
      "persist", "persist-relaxed", "deep-persist", "flush", "drain", "read"};
  return (unsigned)k < RPMEM_COUNT_NKINDS ? names[k] : "?";
}

#endif /* RPMEM_TOOLS_RPMEM_OBJ_BENCH_RPMEM_COUNT_H */
