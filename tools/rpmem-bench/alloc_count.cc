// SPDX-License-Identifier: BSD-3-Clause
// Counts malloc calls made inside librpmem calls, by interposing glibc's malloc.
#include "tools/rpmem-bench/runner.h"

#include <cerrno>
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RPMEM_BENCH_NO_COUNT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define RPMEM_BENCH_NO_COUNT 1
#endif
#endif
#if !defined(__GLIBC__)
#define RPMEM_BENCH_NO_COUNT 1
#endif

namespace rpmem_bench {
namespace {
thread_local bool t_inside = false;
[[maybe_unused]] thread_local int64_t t_allocs = 0;  // unused when not counting
}  // namespace

AllocScope::AllocScope() { t_inside = true; }
AllocScope::~AllocScope() { t_inside = false; }

#ifdef RPMEM_BENCH_NO_COUNT
int64_t thread_allocs() { return -1; }
#else
int64_t thread_allocs() { return t_allocs; }

inline void count() {
  if (t_inside) ++t_allocs;
}
#endif

}  // namespace rpmem_bench

#ifndef RPMEM_BENCH_NO_COUNT
// The executable's definitions come first in symbol lookup, so librpmem's
// (and libstdc++'s operator new's) calls land here. free stays glibc's.
extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);

void *malloc(size_t n) {
  rpmem_bench::count();
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
  rpmem_bench::count();
  return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
  rpmem_bench::count();
  return __libc_realloc(p, n);
}
void *memalign(size_t a, size_t n) {
  rpmem_bench::count();
  return __libc_memalign(a, n);
}
void *aligned_alloc(size_t a, size_t n) {
  rpmem_bench::count();
  return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
  rpmem_bench::count();
  if (a % sizeof(void *) != 0 || (a & (a - 1)) != 0) return EINVAL;
  void *p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}
#endif
