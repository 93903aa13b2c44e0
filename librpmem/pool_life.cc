// SPDX-License-Identifier: BSD-3-Clause
// PoolLife: a pool's states, its gate and its transitions.
#include "librpmem/pool_life.h"

#include "common/log.h"
#include "librpmem/errormsg.h"

#include <cerrno>
#include <cstring>
#include <thread>

namespace rpmem {

const char *state_name(PoolState s) noexcept {
  static constexpr const char *kNames[] = {"in sync", "coming back", "lost",
                                           "closed",  "behind",      "catching up"};
  return kNames[static_cast<size_t>(s)];
}

Admit PoolLife::admit(PoolCall call, int &err) const noexcept {
  switch (state()) {
    case PoolState::kInSync:
    case PoolState::kComingBack:
      return Admit::kTarget;
    case PoolState::kBehind:
    case PoolState::kCatchingUp: {
      const bool catching_up = state() == PoolState::kCatchingUp;
      if (call == PoolCall::kRead) {
        set_errormsg(
            "read operation failed: the replica is behind its pool (RPMEM_ON_LOSS=continue) and "
            "is no source until it has caught up");
        err = ESTALE;
        return Admit::kRefuse;
      }
      if (catching_up) return Admit::kTarget;
      if (call == PoolCall::kSetAttr) {
        set_errormsg("set attributes request failed: the pool runs ahead of its target");
        err = ENOTCONN;
        return Admit::kRefuse;
      }
      return Admit::kLocal;
    }
    case PoolState::kLost:
      break;
    case PoolState::kClosed:
      set_errormsg("the pool is closed");
      err = EINVAL;
      return Admit::kRefuse;
  }
  // At the gate every call says the connection is lost, but close, which
  // keeps PMDK's words for any failure.
  if (call == PoolCall::kClose) {
    err = lost_error(call);
    return Admit::kRefuse;
  }
  try {
    set_errormsg("connection lost: %s", lost_why().c_str());
  } catch (...) {
    set_errormsg("connection lost");
  }
  err = ECONNRESET;
  return Admit::kRefuse;
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
  state_.store(to);
  return true;
}

bool PoolLife::coming_back() noexcept { return move(PoolState::kInSync, PoolState::kComingBack); }

bool PoolLife::back() noexcept { return move(PoolState::kComingBack, PoolState::kInSync); }

bool PoolLife::lose(const std::string &why) noexcept {
  bool behind = false;
  {
    std::lock_guard lock(mu_);
    const PoolState s = state_.load(std::memory_order_relaxed);
    if (s != PoolState::kInSync && s != PoolState::kComingBack && s != PoolState::kCatchingUp)
      return false;
    try {
      why_ = why;
    } catch (...) {
    }
    behind = run_ahead_ && hooks_.prepare_behind && hooks_.prepare_behind(why);
    state_.store(behind ? PoolState::kBehind : PoolState::kLost);
  }
  if (behind)
    RPMEM_LOG_WARN("target lost: %s; the pool runs ahead of it (RPMEM_ON_LOSS=continue)",
                   why.c_str());
  else
    RPMEM_LOG_ERR("target lost: %s", why.c_str());
  if (hooks_.on_lost) hooks_.on_lost(behind);
  return true;
}

bool PoolLife::catching_up() noexcept {
  if (!move(PoolState::kBehind, PoolState::kCatchingUp)) return false;
  // A call that saw the pool behind has marked what it covers by now.
  while (local_calls_.load() != 0) std::this_thread::yield();
  return true;
}

bool PoolLife::caught_up() noexcept {
  if (!move(PoolState::kCatchingUp, PoolState::kInSync)) return false;
  while (local_calls_.load() != 0) std::this_thread::yield();
  return true;
}

bool PoolLife::opened_behind() noexcept { return move(PoolState::kInSync, PoolState::kBehind); }

void PoolLife::close() noexcept {
  std::lock_guard lock(mu_);
  state_.store(PoolState::kClosed, std::memory_order_release);
}

std::string PoolLife::lost_why() const {
  std::lock_guard lock(mu_);
  return why_.empty() ? strerror(ECONNRESET) : why_;
}

}  // namespace rpmem
