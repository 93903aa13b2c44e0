// SPDX-License-Identifier: BSD-3-Clause
// The rpmem side of the benchmark: one pool, and a workload per operation.
#ifndef RPMEM_TOOLS_RPMEM_BENCH_REMOTE_POOL_H
#define RPMEM_TOOLS_RPMEM_BENCH_REMOTE_POOL_H

#include "tools/rpmem-bench/runner.h"

#include <librpmem.h>

#include <memory>
#include <string>
#include <vector>

namespace rpmem_bench {

// A pool on the target, created (or opened, if it already holds one) with
// as many lanes as the largest lane count asked for, closed by the
// destructor. Lane l works in its own slice of the pool: calls cycle through
// successive size-byte blocks of it.
class RemotePool {
 public:
  explicit RemotePool(const Options &opt);  // throws std::runtime_error
  // Another pool set of `size` bytes, opened with `lanes` lanes asked for;
  // its data lanes as `kind` says.
  enum class Lanes {
    kClear,
    kTls,     // RPMEM_DATA_TLS=1, RPMEM_DATA_SEAL=0
    kSealed,  // RPMEM_DATA_TLS=1, RPMEM_DATA_SEAL=1
  };
  RemotePool(const Options &opt, const std::string &pool_set, size_t size, unsigned lanes,
             Lanes kind = Lanes::kClear);  // throws std::runtime_error
  ~RemotePool();
  RemotePool(const RemotePool &) = delete;
  RemotePool &operator=(const RemotePool &) = delete;

  unsigned nlanes() const { return nlanes_; }
  unsigned nlanes_asked() const { return asked_; }
  const char *how_opened() const { return created_ ? "created" : "opened"; }
  // The workload of `c`, or an empty op with `why` set when the case
  // cannot run (more lanes than granted, a block larger than a lane's slice).
  Workload workload(const Case &c, std::string &why);

 private:
  const Options &opt_;
  std::string pool_set_;
  unsigned asked_ = 0;
  RPMEMpool *rpp_ = nullptr;
  uint8_t *base_ = nullptr;
  size_t size_ = 0;
  unsigned nlanes_ = 0;
  bool created_ = false;
  std::vector<uint8_t *> read_bufs_;  // one per lane, as large as the largest block
  size_t read_buf_size_ = 0;
};

}  // namespace rpmem_bench

#endif  // RPMEM_TOOLS_RPMEM_BENCH_REMOTE_POOL_H
