// SPDX-License-Identifier: BSD-3-Clause
// The ranges a lane has flushed and not yet made durable (a tcp lane's
// posted flushes, a verbs lane's RDMA WRITEs) since its last drain: what a
// GPSPM drain asks the target to make durable, what a lane that comes back
// writes again, and what it answers InitiatorLane::unacknowledged() with;
// one implementation for every transport. Adjacent and
// overlapping ranges merge; past `capacity` ranges everything collapses into
// one covering range (flushing more than was written is harmless).
// Not thread-safe: one per lane.
#ifndef RPMEM_COMMON_TRANSPORT_FLUSH_RANGES_H
#define RPMEM_COMMON_TRANSPORT_FLUSH_RANGES_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rpmem::transport {

// A range of the pool: [offset, offset + length).
struct PoolRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const PoolRange &) const = default;
};

class FlushRanges {
 public:
  using Range = PoolRange;
  // Requires: capacity >= 1.
  explicit FlushRanges(size_t capacity) : capacity_(capacity) { ranges_.reserve(capacity); }

  void add(uint64_t offset, uint64_t length) {
    if (length == 0) return;
    if (!ranges_.empty()) {
      Range &last = ranges_.back();
      if (offset <= last.offset + last.length && last.offset <= offset + length) {
        const uint64_t end = std::max(last.offset + last.length, offset + length);
        last.offset = std::min(last.offset, offset);
        last.length = end - last.offset;
        return;
      }
    }
    if (ranges_.size() == capacity_) collapse();
    if (ranges_.size() == capacity_) {  // capacity 1: widen the one range
      Range &only = ranges_.back();
      const uint64_t end = std::max(only.offset + only.length, offset + length);
      only.offset = std::min(only.offset, offset);
      only.length = end - only.offset;
      return;
    }
    ranges_.push_back({offset, length});
  }
  const std::vector<Range> &ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }
  bool full() const { return ranges_.size() == capacity_; }
  void clear() { ranges_.clear(); }

 private:
  void collapse() {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const Range &r : ranges_) {
      lo = std::min(lo, r.offset);
      hi = std::max(hi, r.offset + r.length);
    }
    ranges_.assign(1, Range{lo, hi - lo});
  }

  size_t capacity_;
  std::vector<Range> ranges_;
};

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_FLUSH_RANGES_H
