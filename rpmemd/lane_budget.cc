// SPDX-License-Identifier: BSD-3-Clause
// LaneGrant and the process's descriptor budget for lanes.
#include "rpmemd/lane_budget.h"

#include <sys/resource.h>

#include <algorithm>

namespace rpmemd {
namespace {

// The lanes granted to all sessions together must fit in what RLIMIT_NOFILE
// leaves after kBaseFds and kSessionFds a session.
constexpr long kBaseFds = 48;  // with one session: 64, as always
constexpr long kSessionFds = 16;
std::atomic<long> g_sessions{0};
std::atomic<long> g_lane_fds{0};  // granted to live sessions

// Lanes that fit in the budget now, at most kMaxLanesLimit.
unsigned lanes_fd_budget(unsigned fds_per_lane) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kMaxLanesLimit;
  const long left = static_cast<long>(rl.rlim_cur) - kBaseFds - kSessionFds * g_sessions.load() -
                    g_lane_fds.load();
  const long budget = left / static_cast<long>(fds_per_lane);
  return budget < 1 ? 0 : static_cast<unsigned>(std::min<long>(budget, kMaxLanesLimit));
}

}  // namespace

SessionInBudget::SessionInBudget() noexcept { g_sessions.fetch_add(1); }
SessionInBudget::~SessionInBudget() { g_sessions.fetch_sub(1); }

unsigned LaneGrant::take(unsigned asked, unsigned max_lanes, unsigned fds_per_lane,
                         std::shared_ptr<std::atomic<long>> client, unsigned max_client,
                         std::string &why) {
  release();
  unsigned n =
      std::min({asked, std::min(max_lanes, kMaxLanesLimit), lanes_fd_budget(fds_per_lane)});
  if (n == 0) {
    why = "no file descriptors left for lanes (RLIMIT_NOFILE, shared by all sessions)";
    return 0;
  }
  if (client) {  // what this client's other sessions left, taken at once
    long used = client->load();
    long take = 0;
    do {
      take = std::clamp<long>(static_cast<long>(max_client) - used, 0, n);
    } while (take > 0 && !client->compare_exchange_weak(used, used + take));
    n = static_cast<unsigned>(take);
    if (n == 0) {
      why = "no lanes left for this client (max-lanes-per-client " + std::to_string(max_client) +
            ", in use by its other sessions)";
      return 0;
    }
    client_ = std::move(client);
    client_lanes_ = n;
  }
  fds_ = static_cast<long>(n) * fds_per_lane;
  g_lane_fds.fetch_add(fds_);
  return n;
}

void LaneGrant::release() noexcept {
  g_lane_fds.fetch_sub(fds_);
  fds_ = 0;
  if (client_) client_->fetch_sub(client_lanes_);
  client_.reset();
  client_lanes_ = 0;
}

}  // namespace rpmemd
