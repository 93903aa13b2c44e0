// SPDX-License-Identifier: BSD-3-Clause
// PoolLife: where a pool is in its life, the one place every call asks, and
// the transitions between its states (docs/design.md, "A pool's life"):
//
//   in sync --(the service ended the session)--> coming back --(reopened)--> in sync
//      |                                              |
//      '--(a lane or the control channel lost past RPMEM_TIMEOUT, or rpmemd
//          ended an ssh session)--> lost <------------'
//   any but closed --(rpmem_close)--> closed
//
// In sync and coming back, calls go to the lanes (which wait, within the
// bound, while they come back); lost, every call fails at once with
// ECONNRESET and a message naming the first cause; closed, nothing is
// called. A state "behind" (the target lost, the application going on) has
// its place beside lost: a transition out of in sync or coming back.
//
// Thread-safety: state() and admit() are lock-free (one atomic load); the
// transitions take one mutex of their own, and run their hook (the lanes'
// shutdown) outside it.
#ifndef RPMEM_LIBRPMEM_POOL_LIFE_H
#define RPMEM_LIBRPMEM_POOL_LIFE_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace rpmem {

// In this order (state_name() names them so).
enum class PoolState : uint8_t { kInSync, kComingBack, kLost, kClosed };
const char *state_name(PoolState s) noexcept;

// The calls that ask, each with its words for a failure (PMDK's where
// PMDK had them; pool_life.cc lists them in this order).
enum class PoolCall : uint8_t { kPersist, kDeepPersist, kFlush, kDrain, kRead, kSetAttr, kClose };

class PoolLife {
 public:
  // `on_lost`: what losing the pool does besides the state (every lane
  // shut down, so that calls waiting on them return now).
  explicit PoolLife(std::function<void()> on_lost) : on_lost_(std::move(on_lost)) {}

  PoolState state() const noexcept { return state_.load(std::memory_order_acquire); }
  // The gate of `call`: 0 when it may go to the target, else its errno
  // with the message of this state set (rpmem_errormsg).
  int admit(PoolCall call) const noexcept;
  // The words of `call` failed because the pool is lost (the call itself
  // saw the loss, or found it at the gate): its errno (ECONNRESET), the
  // message set.
  int lost_error(PoolCall call) const noexcept;

  // Transitions; each is false when the pool was not in a state it leaves
  // from (nothing happened).
  bool coming_back() noexcept;  // in sync -> coming back
  bool back() noexcept;         // coming back -> in sync
  // in sync or coming back -> lost, `why` the cause (the first one stays);
  // runs on_lost.
  bool lose(const std::string &why) noexcept;
  void close() noexcept;  // -> closed

  // The cause of the loss ("Connection reset by peer" when none was named).
  std::string lost_why() const;

 private:
  bool move(PoolState from, PoolState to) noexcept;

  std::atomic<PoolState> state_{PoolState::kInSync};
  mutable std::mutex mu_;  // transitions, why_
  std::string why_;
  std::function<void()> on_lost_;
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_POOL_LIFE_H
