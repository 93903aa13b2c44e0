/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_cycle: what a new user does with a large remote pool, timed: create
 * it (with attributes), persist 4 KiB and a relaxed 1 MiB, close, open,
 * read the 4 KiB back, close. For scripts/test-pmem.sh, which compares the
 * times over tcp and verbs and reads rpmemd's peak memory from its log.
 *   pool_cycle TARGET POOL_SET SIZE_MIB
 * Prints "create_ms N open_ms N" and exits 0, or says what failed and
 * exits 1.
 */
#include <errno.h>
#include <librpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int fail(const char *what) {
  fprintf(stderr, "pool_cycle: %s failed: %s (errno %d)\n", what, rpmem_errormsg(), errno);
  return 1;
}

int main(int argc, char *argv[]) {
  if (argc != 4) {
    fprintf(stderr, "usage: pool_cycle TARGET POOL_SET SIZE_MIB\n");
    return 2;
  }
  const size_t size = (size_t)strtoull(argv[3], NULL, 10) << 20;
  unsigned char *pool =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pool == MAP_FAILED) {
    perror("pool_cycle: mmap");
    return 1;
  }
  /* The pages are there, as an application's pool's are (libpmemobj has
   * mapped and used it): over verbs the library registers the pool, and
   * that should not be charged with their first touch. */
  memset(pool, 0, size);
  for (size_t i = 4096; i < 8192; ++i) pool[i] = (unsigned char)(i * 7 + 1);
  memset(pool + (8 << 20), 0x5a, 1 << 20);
  struct rpmem_pool_attr attr;
  memset(&attr, 0, sizeof(attr));
  memcpy(attr.signature, "CYCLE", 6);
  attr.major = 1;
  unsigned nlanes = 4;

  double t0 = now_ms();
  RPMEMpool *rpp = rpmem_create(argv[1], argv[2], pool, size, &nlanes, &attr);
  if (!rpp) return fail("rpmem_create");
  double create_ms = now_ms() - t0;
  if (rpmem_persist(rpp, 4096, 4096, 0, 0)) return fail("rpmem_persist");
  if (rpmem_persist(rpp, 8 << 20, 1 << 20, 1, RPMEM_PERSIST_RELAXED))
    return fail("rpmem_persist (relaxed)");
  if (rpmem_close(rpp)) return fail("rpmem_close");

  struct rpmem_pool_attr got;
  t0 = now_ms();
  rpp = rpmem_open(argv[1], argv[2], pool, size, &nlanes, &got);
  if (!rpp) return fail("rpmem_open");
  double open_ms = now_ms() - t0;
  unsigned char back[4096];
  if (rpmem_read(rpp, back, 4096, sizeof(back), 0)) return fail("rpmem_read");
  if (memcmp(back, pool + 4096, sizeof(back)) != 0 || memcmp(got.signature, "CYCLE", 6) != 0) {
    fprintf(stderr, "pool_cycle: the pool did not read back as written\n");
    return 1;
  }
  if (rpmem_close(rpp)) return fail("rpmem_close");
  printf("create_ms %.0f open_ms %.0f\n", create_ms, open_ms);
  return 0;
}
