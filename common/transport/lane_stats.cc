// SPDX-License-Identifier: BSD-3-Clause
// LaneTotals, LaneCounters, TargetCounters: what a target's lanes did, for status.
#include "common/transport/lane_stats.h"

#include <algorithm>
#include <cmath>

namespace rpmem::transport {

LaneTotals &LaneTotals::operator+=(const LaneTotals &o) noexcept {
  persists += o.persists;
  persisted_bytes += o.persisted_bytes;
  flushes += o.flushes;
  flushed_bytes += o.flushed_bytes;
  drains += o.drains;
  reads += o.reads;
  read_bytes += o.read_bytes;
  visible_bytes += o.visible_bytes;
  failed += o.failed;
  lanes_back += o.lanes_back;
  probes += o.probes;
  served_ns += o.served_ns;
  last_ns = std::max(last_ns, o.last_ns);
  for (size_t i = 0; i < kLatencyBuckets; ++i) latency[i] += o.latency[i];
  return *this;
}

uint64_t LaneTotals::quantile_ns(double q) const noexcept {
  const uint64_t n = timed();
  if (n == 0) return 0;
  // The rank of the quantile among n samples, 1-based.
  const auto rank = static_cast<uint64_t>(std::max(1.0, std::ceil(q * static_cast<double>(n))));
  uint64_t seen = 0;
  for (size_t i = 0; i < kLatencyBuckets; ++i) {
    seen += latency[i];
    if (seen >= rank) return i < kLatencyBoundsNs.size() ? kLatencyBoundsNs[i] : UINT64_MAX;
  }
  return UINT64_MAX;
}

void LaneCounters::served(LaneOp op, uint64_t bytes, int64_t started_ns, bool failed) noexcept {
  const int64_t now = now_ns();
  switch (op) {
    case LaneOp::kPersist:
    case LaneOp::kDeepPersist:
      bump(persists_, 1);
      bump(persisted_bytes_, bytes);
      break;
    case LaneOp::kFlush:
      bump(flushes_, 1);
      bump(flushed_bytes_, bytes);
      break;
    case LaneOp::kDrain:
      bump(drains_, 1);
      break;
    case LaneOp::kRead:
      bump(reads_, 1);
      bump(read_bytes_, bytes);
      break;
  }
  if (failed) bump(failed_, 1);
  if (op == LaneOp::kPersist || op == LaneOp::kDeepPersist || op == LaneOp::kDrain) {
    const uint64_t took = now > started_ns ? static_cast<uint64_t>(now - started_ns) : 0;
    const size_t b = static_cast<size_t>(
        std::lower_bound(kLatencyBoundsNs.begin(), kLatencyBoundsNs.end(), took) -
        kLatencyBoundsNs.begin());
    bump(latency_[b], 1);
    bump(served_ns_, took);
  }
  last_ns_.store(now, std::memory_order_relaxed);
}

void LaneCounters::add_to(LaneTotals &t) const noexcept {
  auto get = [](const std::atomic<uint64_t> &c) { return c.load(std::memory_order_relaxed); };
  t.persists += get(persists_);
  t.persisted_bytes += get(persisted_bytes_);
  t.flushes += get(flushes_);
  t.flushed_bytes += get(flushed_bytes_);
  t.drains += get(drains_);
  t.reads += get(reads_);
  t.read_bytes += get(read_bytes_);
  t.visible_bytes += get(visible_bytes_);
  t.failed += get(failed_);
  t.probes += get(probes_);
  t.served_ns += get(served_ns_);
  t.last_ns = std::max(t.last_ns, last_ns_.load(std::memory_order_relaxed));
  for (size_t i = 0; i < kLatencyBuckets; ++i) t.latency[i] += get(latency_[i]);
}

LaneTotals TargetCounters::sum() const noexcept {
  LaneTotals t;
  for (unsigned i = 0; i < n_; ++i) lanes_[i].add_to(t);
  t.lanes_back = lanes_returned();
  return t;
}

}  // namespace rpmem::transport
