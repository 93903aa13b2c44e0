// SPDX-License-Identifier: BSD-3-Clause
// rpmem-bench: the options, the cases and their measured results.
#ifndef RPMEM_TOOLS_RPMEM_BENCH_BENCH_H
#define RPMEM_TOOLS_RPMEM_BENCH_BENCH_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rpmem_bench {

// What one case measures. The rpmem operations go through librpmem's public
// API only; the raw ones through plain TCP sockets to a built-in server.
enum class Op {
  kPersist,         // rpmem_persist(flags 0)
  kPersistRelaxed,  // rpmem_persist(RPMEM_PERSIST_RELAXED)
  kPersistVisible,  // rpmem_persist(RPMEM_PERSIST_VISIBLE): the visible level
  kDeepPersist,     // rpmem_deep_persist
  kFlushDrain,      // batch x rpmem_flush + rpmem_drain
  kRead,            // rpmem_read
  kPersistWide,     // rpmem_persist(flags 0) on lane 0 of a pool with --wide-lanes lanes open
  kPersistTls,      // rpmem_persist(flags 0) on the pool of --data-tls (lanes inside TLS)
  kReadTls,         // rpmem_read on it
  kPersistSealed,   // rpmem_persist(flags 0) on the sealed pool of --data-tls
  kReadSealed,      // rpmem_read on it
  kRawRr,           // TCP: a request of `size` bytes, a 16-byte reply, both sides
                    // waiting as rpmem's TCP transport waits (spin, then poll)
  kRawRrBlock,      // the same, both sides blocking in recv
  kRawStream,       // TCP: one stream written in `size`-byte pieces
  kRawSeal,         // AES-128-GCM in this process: seal `size` bytes in frames of
                    // at most 64 KiB, as sealed lanes do, and open them again
                    // (--data-tls): what one message costs each way in CPU
  kRawDsync,        // durable writes: pwrite(`size` bytes) on an O_DSYNC file in
                    // --raw-disk DIR, one writer per lane, at the offsets of the
                    // rpmem cases in a file allocated as rpmemd allocates parts
};

const char *op_name(Op op);
bool is_raw(Op op);

enum class Format { kTable, kCsv, kJson };

struct Options {
  std::string target = "127.0.0.1";
  std::string pool_set = "bench.set";
  size_t pool_size = size_t{64} << 20;
  std::vector<Op> ops{Op::kPersist, Op::kPersistRelaxed, Op::kDeepPersist, Op::kFlushDrain,
                      Op::kRead};
  std::vector<size_t> sizes{64, 4096, 65536, size_t{1} << 20};
  std::vector<unsigned> lanes{1};
  double duration_s = 2.0;  // per case and run, unless count is set
  uint64_t count = 0;       // operations per lane (0: run for duration_s)
  double warmup_s = 0.2;
  // Above 0: the first measured run starts at this wall-clock time (seconds
  // since the epoch) instead of after warmup_s, so that the runs of many
  // processes cover one window (service-scaling.sh).
  double start_at = 0;
  unsigned batch = 16;  // flushes per drain
  unsigned repeat = 1;  // runs of every case; the figures are medians
  bool raw = true;
  bool rpmem = true;
  bool remove = false;  // rpmem_remove the pool at the end if we created it
  // With wide_lanes > 0: a second pool, opened with that many lanes asked
  // for, on which persist-wide uses lane 0 only.
  unsigned wide_lanes = 0;
  std::string wide_pool_set = "bench-wide.set";
  // Non-empty: also measure raw-dsync in a file there (the file system that
  // holds the pool), and compare persists with it.
  std::string raw_disk;
  size_t wide_pool_size = size_t{8} << 20;
  // With data_tls: a third pool, of pool_size bytes, whose data lanes run
  // inside TLS (RPMEM_DATA_TLS=1), for persist-tls and read-tls.
  bool data_tls = false;
  std::string tls_pool_set = "bench-tls.set";
  // ... and a fourth, its lanes sealed (RPMEM_DATA_TLS=1 with
  // RPMEM_DATA_SEAL=1; the third has RPMEM_DATA_SEAL=0), for
  // persist-sealed and read-sealed.
  std::string sealed_pool_set = "bench-sealed.set";
  Format format = Format::kTable;
  int progress = -1;  // -1: when stderr is a terminal
};

// Parses argv; prints usage and exits on --help or on an error.
Options parse_options(int argc, char **argv);

struct Case {
  Op op;
  size_t size;
  unsigned lanes;
};

struct Result {
  Case c;
  double p50_us = 0, p99_us = 0, p999_us = 0;  // per operation (a batch for flush+drain)
  double ops_s = 0;                            // size-byte writes or reads per second
  std::vector<double> run_ops_s;               // ops_s of each run, in run order
  double mb_s = 0;                             // 10^6 bytes per second
  uint64_t ops = 0;                            // operations measured (all runs)
  double allocs_per_op = -1;                   // mallocs inside librpmem calls; -1 unknown
  // CPU time per call (medians of the runs): this process's, and the
  // daemons' it started (rpmemd through RPMEM_SSH on this machine).
  double cpu_us = 0, daemon_cpu_us = 0;
  int error = 0;  // errno of a failed case
  std::string error_text;
};

// Samples of one run of one case, one vector per lane.
struct RunSamples {
  std::vector<std::vector<uint32_t>> lat_ns;  // latency of each operation
  uint64_t ops = 0;                           // size-byte units done
  double seconds = 0;                         // wall time of the measured part
  double cpu_s = 0, daemon_cpu_s = 0;         // CPU time in it (see Result)
  uint64_t allocs = 0;
  int error = 0;
  std::string error_text;
};

}  // namespace rpmem_bench

#endif  // RPMEM_TOOLS_RPMEM_BENCH_BENCH_H
