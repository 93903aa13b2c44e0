// SPDX-License-Identifier: BSD-3-Clause
// LaneSet: the lanes of one pool, each in a slot of its own. A call on lane
// i holds slot i's mutex, which no other lane shares (on the data path
// nothing else is locked), so that a lane can be shut down from any thread
// while calls wait on it, and put in place of another while the others go
// on: the slot's call in progress ends first.
//
// Thread-safety: with() on different lanes runs in parallel; on one lane,
// one call at a time (PMDK's rule, and the slot's mutex holds to it).
// shutdown_all() from any thread at any time; clear() when no call is in
// progress (close).
#ifndef RPMEM_LIBRPMEM_LANE_SET_H
#define RPMEM_LIBRPMEM_LANE_SET_H

#include "common/transport/transport.h"

#include <memory>
#include <mutex>
#include <vector>

namespace rpmem {

using Lanes = std::vector<std::unique_ptr<transport::InitiatorLane>>;

class LaneSet {
 public:
  explicit LaneSet(Lanes lanes);
  size_t size() const noexcept { return n_; }

  // f(lane) on lane `i` (< size()), holding its slot.
  template <class F>
  auto with(unsigned i, F &&f) {
    Slot &s = slots_[i];
    std::lock_guard lock(s.use);
    return f(*s.lane);
  }
  // f(lane(i)) with every slot held (taken in order, once each call under
  // way is done): no call of the application is on a lane meanwhile.
  // `lane(i)` may be called only within f.
  template <class F>
  auto with_all(F &&f) {
    std::vector<std::unique_lock<std::mutex>> held;
    held.reserve(n_);
    for (size_t i = 0; i < n_; ++i) held.emplace_back(slots_[i].use);
    return f([this](unsigned i) -> transport::InitiatorLane & { return *slots_[i].lane; });
  }
  // Every lane fails its call in progress and every later one (ECONNRESET).
  void shutdown_all() noexcept;
  // Every lane closed (its connection with it); with() may not be called
  // afterwards.
  void clear() noexcept;
  // `lanes` (size() of them) in the place of the ones there, each taken
  // once its slot's call under way (if any) is done; the old ones closed.
  void replace(Lanes lanes) noexcept;
  // What lane `i` has not had acknowledged (between its calls).
  std::vector<transport::PoolRange> unacknowledged(unsigned i);

 private:
  struct Slot {
    std::mutex use;  // held by the call on the lane
    std::unique_ptr<transport::InitiatorLane> lane;
  };
  size_t n_;
  std::unique_ptr<Slot[]> slots_;
  std::mutex roster_;  // a lane's pointer changes only under it and its slot
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_LANE_SET_H
