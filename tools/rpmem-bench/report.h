// SPDX-License-Identifier: BSD-3-Clause
// Turns the runs of each case into figures and prints them as a table, CSV or JSON.
#ifndef RPMEM_TOOLS_RPMEM_BENCH_REPORT_H
#define RPMEM_TOOLS_RPMEM_BENCH_REPORT_H

#include "tools/rpmem-bench/bench.h"

#include <cstdio>
#include <string>
#include <vector>

namespace rpmem_bench {

// Percentiles of each run, then the median of every figure over the runs.
Result summarize(const Case &c, std::vector<RunSamples> &runs);

// Facts about the machine and the run, printed with the figures.
struct RunInfo {
  std::string command;  // the command line
  std::string library;  // the librpmem.so.1 that was loaded
  std::string machine;  // CPU model and count, kernel
  std::string pool;     // target, pool set, created/opened, lanes
  std::string date;
  unsigned cpus = 1;  // this process may run on (its affinity)
};

void print(std::FILE *out, Format f, const RunInfo &info, const std::vector<Result> &results);

}  // namespace rpmem_bench

#endif  // RPMEM_TOOLS_RPMEM_BENCH_REPORT_H
