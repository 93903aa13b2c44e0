// SPDX-License-Identifier: BSD-3-Clause
// PoolLife: a pool's states, its gate and its transitions.
#include "librpmem/pool_life.h"

#include "common/log.h"
#include "librpmem/errormsg.h"

#include <cerrno>
#include <cstring>

namespace rpmem {

const char *state_name(PoolState s) noexcept {
  static constexpr const char *kNames[] = {"in sync", "coming back", "lost", "closed"};
  return kNames[static_cast<size_t>(s)];
}

int PoolLife::admit(PoolCall call) const noexcept {
  switch (state()) {
    case PoolState::kInSync:
    case PoolState::kComingBack:
      return 0;
    case PoolState::kLost:
      break;
    case PoolState::kClosed:
      set_errormsg("the pool is closed");
      return EINVAL;
  }
  // At the gate every call says the connection is lost, but close, which
  // keeps PMDK's words for any failure.
  if (call == PoolCall::kClose) return lost_error(call);
  try {
    set_errormsg("connection lost: %s", lost_why().c_str());
  } catch (...) {
    set_errormsg("connection lost");
  }
  return ECONNRESET;
}

int PoolLife::lost_error(PoolCall call) const noexcept try {
  // Each call's words for a loss it saw, in PoolCall's order (PMDK's
  // deep persist said only that it failed).
  static constexpr const char *kWords[] = {"persist operation failed: ", "persist operation failed",
                                           "flush operation failed: ",   "drain operation failed: ",
                                           "read operation failed: ",    "connection lost: ",
                                           "close request failed: "};
  const char *words = kWords[static_cast<size_t>(call)];
  const bool why = words[std::strlen(words) - 1] == ' ';
  set_errormsg("%s%s", words, why ? lost_why().c_str() : "");
  return ECONNRESET;
} catch (...) {
  set_errormsg("connection lost");
  return ECONNRESET;
}

bool PoolLife::move(PoolState from, PoolState to) noexcept {
  std::lock_guard lock(mu_);
  if (state_.load(std::memory_order_relaxed) != from) return false;
  state_.store(to, std::memory_order_release);
  return true;
}

bool PoolLife::coming_back() noexcept { return move(PoolState::kInSync, PoolState::kComingBack); }

bool PoolLife::back() noexcept { return move(PoolState::kComingBack, PoolState::kInSync); }

bool PoolLife::lose(const std::string &why) noexcept {
  {
    std::lock_guard lock(mu_);
    const PoolState s = state_.load(std::memory_order_relaxed);
    if (s != PoolState::kInSync && s != PoolState::kComingBack) return false;
    try {
      why_ = why;
    } catch (...) {
    }
    state_.store(PoolState::kLost, std::memory_order_release);
  }
  RPMEM_LOG_ERR("target lost: %s", why.c_str());
  if (on_lost_) on_lost_();
  return true;
}

void PoolLife::close() noexcept {
  std::lock_guard lock(mu_);
  state_.store(PoolState::kClosed, std::memory_order_release);
}

std::string PoolLife::lost_why() const {
  std::lock_guard lock(mu_);
  return why_.empty() ? strerror(ECONNRESET) : why_;
}

}  // namespace rpmem
