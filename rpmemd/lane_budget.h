// SPDX-License-Identifier: BSD-3-Clause
// The lanes a session may have: what its client asks, at most max-lanes,
// what the process's descriptors leave (shared by every session), and in
// service mode what the client certificate's other sessions leave
// (max-lanes-per-client). Thread-safe: sessions run on threads of their own.
#ifndef RPMEMD_LANE_BUDGET_H
#define RPMEMD_LANE_BUDGET_H

#include "rpmemd/config.h"

#include <atomic>
#include <memory>
#include <string>

namespace rpmemd {

// A session counted in the descriptor budget while it lives: it keeps some
// descriptors for itself (control, data listener, lane servers, pool files).
class SessionInBudget {
 public:
  SessionInBudget() noexcept;
  ~SessionInBudget();
  SessionInBudget(const SessionInBudget &) = delete;
  SessionInBudget &operator=(const SessionInBudget &) = delete;
};

// Lanes granted to a session, given back by release() or the destructor.
class LaneGrant {
 public:
  LaneGrant() = default;
  ~LaneGrant() { release(); }
  LaneGrant(const LaneGrant &) = delete;
  LaneGrant &operator=(const LaneGrant &) = delete;

  // Takes min(asked, max_lanes, kMaxLanesLimit, what the descriptors leave) lanes
  // of fds_per_lane descriptors each (a tcp lane one, a verbs lane two: its
  // queue pair's event channel too), then what `client` (null: no such cap)
  // leaves under max_client. 0, and `why` for the log, when none is left.
  unsigned take(unsigned asked, unsigned max_lanes, unsigned fds_per_lane,
                std::shared_ptr<std::atomic<long>> client, unsigned max_client, std::string &why);
  void release() noexcept;

 private:
  long fds_ = 0;
  std::shared_ptr<std::atomic<long>> client_;
  long client_lanes_ = 0;
};

}  // namespace rpmemd

#endif  // RPMEMD_LANE_BUDGET_H
