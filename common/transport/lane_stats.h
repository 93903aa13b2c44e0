// SPDX-License-Identifier: BSD-3-Clause
// What a target's lanes did, for the people who run the daemon: per lane,
// the requests and bytes of each kind, the requests that failed, when the
// last one came, and how long persists and drains took to serve (from the
// whole request in hand to its reply posted) in a histogram.
//
// Thread-safety: each lane's counters are written by the one thread that
// serves the lane, with relaxed atomic stores (no read-modify-write, no
// lock, a cache line of their own); any thread may read them at any time
// and sum the lanes (sum()). A reader sees each counter whole, not all of
// them at one instant.
#ifndef RPMEM_COMMON_TRANSPORT_LANE_STATS_H
#define RPMEM_COMMON_TRANSPORT_LANE_STATS_H

#include "common/wire.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace rpmem::transport {

// The histogram's upper bounds, in nanoseconds: 1, 2, 5 per decade from
// 1 us to 10 s; a last bucket takes what is slower.
inline constexpr std::array<uint64_t, 22> kLatencyBoundsNs = {
    1'000,         2'000,         5'000,         10'000,        20'000,      50'000,
    100'000,       200'000,       500'000,       1'000'000,     2'000'000,   5'000'000,
    10'000'000,    20'000'000,    50'000'000,    100'000'000,   200'000'000, 500'000'000,
    1'000'000'000, 2'000'000'000, 5'000'000'000, 10'000'000'000};
inline constexpr size_t kLatencyBuckets = kLatencyBoundsNs.size() + 1;

// What a lane's thread reports after each request: the lane operations
// (wire.h); a deep persist counts as a persist.
using wire::LaneOp;

// Sums over lanes (or one lane's counters, read).
struct LaneTotals {
  uint64_t persists = 0, persisted_bytes = 0;  // persists and deep persists
  uint64_t flushes = 0, flushed_bytes = 0;     // posted writes, durable at a drain
  uint64_t drains = 0;
  uint64_t reads = 0, read_bytes = 0;
  uint64_t visible_bytes = 0;  // of persisted and flushed: acknowledged visible
  uint64_t failed = 0;         // requests answered with an error status
  uint64_t lanes_back = 0;     // lanes that connected again within their session
  uint64_t probes = 0;         // probes answered: a client's reply was late (proto::DataOp::kProbe)
  int64_t last_ns = 0;         // steady clock of the latest request; 0: none yet
  uint64_t served_ns = 0;      // sum of the persists' and drains' service times
  std::array<uint64_t, kLatencyBuckets> latency{};  // persists and drains, per bucket
  LaneTotals &operator+=(const LaneTotals &o) noexcept;
  uint64_t calls() const noexcept { return persists + flushes + drains + reads; }
  // Bytes of persists and flushes acknowledged persistent.
  uint64_t persistent_bytes() const noexcept {
    const uint64_t written = persisted_bytes + flushed_bytes;
    return written - (visible_bytes < written ? visible_bytes : written);
  }
  uint64_t timed() const noexcept {
    uint64_t n = 0;
    for (uint64_t b : latency) n += b;
    return n;
  }
  // The upper bound of the bucket that holds quantile `q` (0 < q <= 1) of
  // the timed requests, in ns; 0 when there are none; UINT64_MAX when it is
  // the last, unbounded bucket.
  uint64_t quantile_ns(double q) const noexcept;
};

class alignas(64) LaneCounters {
 public:
  static int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // A request of `op` for `bytes` was served; `started_ns` is now_ns() when
  // it was whole in hand (timed for persists and drains), `failed` when its
  // reply carries an error. Called by the lane's thread only.
  void served(LaneOp op, uint64_t bytes, int64_t started_ns, bool failed) noexcept;
  // ... and its `bytes` were acknowledged at the visible level (a persist,
  // or a flush the session granted it for).
  void visible(uint64_t bytes) noexcept { bump(visible_bytes_, bytes); }
  // A probe was answered: the client waited long for a reply (a lost
  // packet, or a slow one). Not a request: not timed, no last request.
  void probed() noexcept { bump(probes_, 1); }
  void add_to(LaneTotals &t) const noexcept;

 private:
  static void bump(std::atomic<uint64_t> &c, uint64_t by) noexcept {
    c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> persists_{0}, persisted_bytes_{0}, flushes_{0}, flushed_bytes_{0},
      drains_{0}, reads_{0}, read_bytes_{0}, failed_{0}, served_ns_{0}, visible_bytes_{0},
      probes_{0};
  std::atomic<int64_t> last_ns_{0};
  std::array<std::atomic<uint64_t>, kLatencyBuckets> latency_{};
};

// The counters of a target's lanes, one per lane it may grant.
class TargetCounters {
 public:
  explicit TargetCounters(unsigned nlanes)
      : n_(nlanes ? nlanes : 1), lanes_(std::make_unique<LaneCounters[]>(n_)) {}
  // Lane `i`'s counters; null past the last lane.
  LaneCounters *lane(unsigned i) noexcept { return i < n_ ? &lanes_[i] : nullptr; }
  LaneTotals sum() const noexcept;
  // A lane connected again within its session (its connection broke or
  // stalled); from the thread that admits lanes.
  void lane_returned() noexcept { returned_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t lanes_returned() const noexcept { return returned_.load(std::memory_order_relaxed); }

 private:
  unsigned n_;
  std::atomic<uint64_t> returned_{0};
  std::unique_ptr<LaneCounters[]> lanes_;
};

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_LANE_STATS_H
