// SPDX-License-Identifier: BSD-3-Clause
// The rpmem side of the benchmark: one pool, and a workload per operation.
#include "tools/rpmem-bench/remote_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rpmem_bench {
namespace {

constexpr size_t kHdr = 4096;  // the pool header the client may not write
constexpr size_t kPage = 4096;

uint8_t *map_anon(size_t n) {
  void *p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
  return static_cast<uint8_t *>(p);
}

}  // namespace

RemotePool::RemotePool(const Options &opt)
    : RemotePool(opt, opt.pool_set, opt.pool_size,
                 *std::max_element(opt.lanes.begin(), opt.lanes.end())) {}

RemotePool::RemotePool(const Options &opt, const std::string &pool_set, size_t size, unsigned lanes,
                       Lanes kind)
    : opt_(opt), pool_set_(pool_set), asked_(lanes) {
  size_ = size;
  base_ = map_anon(size_);
  for (size_t i = 0; i < size_; i += 8) {  // not zeros: a page of zeros may be special somewhere
    uint64_t v = i * 0x9e3779b97f4a7c15ull;
    std::memcpy(base_ + i, &v, std::min<size_t>(8, size_ - i));
  }
  const unsigned want = lanes;
  unsigned nlanes = want;
  rpmem_pool_attr attr{};
  std::memcpy(attr.signature, "RPMEMBEN", 8);
  attr.major = 1;
  // librpmem reads RPMEM_DATA_TLS at each create and open.
  const bool tls = kind != Lanes::kClear;
  if (tls) {
    ::setenv("RPMEM_DATA_TLS", "1", 1);
    ::setenv("RPMEM_DATA_SEAL", kind == Lanes::kSealed ? "1" : "0", 1);
  }
  rpp_ = rpmem_create(opt.target.c_str(), pool_set_.c_str(), base_, size_, &nlanes, &attr);
  created_ = rpp_ != nullptr;
  if (!rpp_ && errno == EEXIST) {
    nlanes = want;
    rpp_ = rpmem_open(opt.target.c_str(), pool_set_.c_str(), base_, size_, &nlanes, &attr);
  }
  if (tls) {
    ::unsetenv("RPMEM_DATA_TLS");
    ::unsetenv("RPMEM_DATA_SEAL");
  }
  if (!rpp_) {
    std::string why = rpmem_errormsg();
    ::munmap(base_, size_);
    throw std::runtime_error("cannot create or open " + opt.target + ":" + pool_set_ + ": " + why);
  }
  nlanes_ = nlanes;
  for (size_t s : opt.sizes) read_buf_size_ = std::max(read_buf_size_, s);
  const unsigned read_lanes =
      std::min(nlanes_, *std::max_element(opt.lanes.begin(), opt.lanes.end()));
  for (unsigned l = 0; l < read_lanes; ++l) read_bufs_.push_back(map_anon(read_buf_size_));
}

RemotePool::~RemotePool() {
  if (rpmem_close(rpp_) != 0) std::fprintf(stderr, "rpmem-bench: close: %s\n", rpmem_errormsg());
  if (created_ && opt_.remove && rpmem_remove(opt_.target.c_str(), pool_set_.c_str(), 0) != 0)
    std::fprintf(stderr, "rpmem-bench: remove: %s\n", rpmem_errormsg());
  for (auto *b : read_bufs_) ::munmap(b, read_buf_size_);
  ::munmap(base_, size_);
}

Workload RemotePool::workload(const Case &c, std::string &why) {
  Workload w;
  if (c.lanes > nlanes_) {
    why = "only " + std::to_string(nlanes_) + " lanes granted";
    return w;
  }
  const size_t slice = (size_ - kHdr) / c.lanes / kPage * kPage;
  const size_t slots = slice / c.size;
  if (slots == 0) {
    why = "block larger than a lane's slice of the pool (--pool-size)";
    return w;
  }
  const size_t size = c.size;
  auto at = [this, slice, slots, size](unsigned lane, uint64_t i) {
    return kHdr + lane * slice + (i % slots) * size;
  };
  RPMEMpool *rpp = rpp_;
  switch (c.op) {
    case Op::kPersist:
    case Op::kPersistWide:
    case Op::kPersistTls:
    case Op::kPersistSealed:
    case Op::kPersistRelaxed:
    case Op::kPersistVisible: {
      unsigned flags = c.op == Op::kPersistRelaxed   ? RPMEM_PERSIST_RELAXED
                       : c.op == Op::kPersistVisible ? RPMEM_PERSIST_VISIBLE
                                                     : 0;
      w.op = [rpp, at, size, flags](unsigned lane, uint64_t i) {
        AllocScope scope;
        return rpmem_persist(rpp, at(lane, i), size, lane, flags) ? errno : 0;
      };
      break;
    }
    case Op::kDeepPersist:
      w.op = [rpp, at, size](unsigned lane, uint64_t i) {
        AllocScope scope;
        return rpmem_deep_persist(rpp, at(lane, i), size, lane) ? errno : 0;
      };
      break;
    case Op::kFlushDrain: {
      const unsigned batch = opt_.batch;
      w.units = batch;
      w.op = [rpp, at, size, batch](unsigned lane, uint64_t i) {
        AllocScope scope;
        for (unsigned k = 0; k < batch; ++k)
          if (rpmem_flush(rpp, at(lane, i * batch + k), size, lane, 0)) return errno;
        return rpmem_drain(rpp, lane, 0) ? errno : 0;
      };
      break;
    }
    case Op::kRead:
    case Op::kReadTls:
    case Op::kReadSealed:
      w.op = [this, rpp, at, size](unsigned lane, uint64_t i) {
        AllocScope scope;
        return rpmem_read(rpp, read_bufs_[lane], at(lane, i), size, lane) ? errno : 0;
      };
      break;
    default:
      why = "not an rpmem operation";
      break;
  }
  return w;
}

}  // namespace rpmem_bench
