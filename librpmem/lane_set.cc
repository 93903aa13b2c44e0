// SPDX-License-Identifier: BSD-3-Clause
// LaneSet: the slots of a pool's lanes.
#include "librpmem/lane_set.h"

namespace rpmem {

LaneSet::LaneSet(Lanes lanes) : n_(lanes.size()), slots_(std::make_unique<Slot[]>(lanes.size())) {
  for (size_t i = 0; i < n_; ++i) slots_[i].lane = std::move(lanes[i]);
}

void LaneSet::shutdown_all() noexcept {
  std::lock_guard lock(roster_);
  for (size_t i = 0; i < n_; ++i)
    if (slots_[i].lane) slots_[i].lane->shutdown();
}

void LaneSet::replace(Lanes lanes) noexcept {
  std::lock_guard lock(roster_);
  for (size_t i = 0; i < n_ && i < lanes.size(); ++i) {
    std::lock_guard use(slots_[i].use);
    slots_[i].lane = std::move(lanes[i]);  // the old one closes here
  }
}

std::vector<transport::PoolRange> LaneSet::unacknowledged(unsigned i) {
  return with(i, [](transport::InitiatorLane &l) { return l.unacknowledged(); });
}

void LaneSet::clear() noexcept {
  std::lock_guard lock(roster_);
  for (size_t i = 0; i < n_; ++i) {
    std::lock_guard use(slots_[i].use);
    slots_[i].lane.reset();
  }
}

}  // namespace rpmem
