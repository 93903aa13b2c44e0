// SPDX-License-Identifier: BSD-3-Clause
// Runs one operation on several lanes at once and times every call.
#ifndef RPMEM_TOOLS_RPMEM_BENCH_RUNNER_H
#define RPMEM_TOOLS_RPMEM_BENCH_RUNNER_H

#include "tools/rpmem-bench/bench.h"

#include <atomic>
#include <functional>
#include <string>

namespace rpmem_bench {

// One operation, the i-th on this lane; returns 0 or an errno. `units` is
// how many size-byte pieces one call moves (the batch for flush+drain).
struct Workload {
  std::function<int(unsigned lane, uint64_t i)> op;
  // Called once per lane after the last operation, inside the timed part
  // (a stream's final acknowledgement); may be empty.
  std::function<int(unsigned lane)> finish;
  unsigned units = 1;
};

// Runs `w` on `lanes` threads: a warm-up, then the measured part (for
// opt.duration_s, or opt.count calls per lane). `label` names the case on
// the progress line.
RunSamples run_lanes(const Options &opt, unsigned lanes, const Workload &w,
                     const std::string &label);

// Counts the allocations made inside library calls on this thread, while
// an AllocScope is alive (see alloc_count.cc).
struct AllocScope {
  AllocScope();
  ~AllocScope();
  AllocScope(const AllocScope &) = delete;
  AllocScope &operator=(const AllocScope &) = delete;
};
// Allocations counted on this thread so far; -1 when counting is not built in.
int64_t thread_allocs();

}  // namespace rpmem_bench

#endif  // RPMEM_TOOLS_RPMEM_BENCH_RUNNER_H
