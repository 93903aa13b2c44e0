// SPDX-License-Identifier: BSD-3-Clause
// PoolLife: where a pool is in its life, the one place every call asks, and
// the transitions between its states (docs/design.md, "A pool's life"):
//
//   in sync --(the service ended the session)--> coming back --(reopened)--> in sync
//      |                                              |
//      +--(the target lost: a lane or the control channel past RPMEM_TIMEOUT,
//      |   an ssh session's end, a reopen refused or out of time)--+
//      |                                                           |
//      |        RPMEM_ON_LOSS=fail: lost <-------------------------+
//      |        RPMEM_ON_LOSS=continue: behind <-------------------'
//      |                                  |  ^
//      |                  (reattached)    v  | (lost again)
//      '<-------(caught up)----------- catching up
//   any but closed --(rpmem_close)--> closed
//
// In sync, coming back and catching up, the writes go to the lanes (which
// wait, within the bound, while they come back); catching up, reads are
// refused (the replica is no source yet). Behind, writes complete locally
// (the caller marks what they cover) and reads are refused. Lost, every
// call fails at once with ECONNRESET and a message naming the first cause;
// closed, nothing is called.
//
// Thread-safety: state() and admit() are lock-free (one atomic load); the
// transitions take one mutex of their own; the hooks run outside it but
// for prepare_behind, which runs under it so that no call sees the pool
// behind before it can run ahead.
#ifndef RPMEM_LIBRPMEM_POOL_LIFE_H
#define RPMEM_LIBRPMEM_POOL_LIFE_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace rpmem {

// In this order (state_name() names them so).
enum class PoolState : uint8_t { kInSync, kComingBack, kLost, kClosed, kBehind, kCatchingUp };
const char *state_name(PoolState s) noexcept;

// The calls that ask, each with its words for a failure (PMDK's where
// PMDK had them; pool_life.cc lists them in this order).
enum class PoolCall : uint8_t { kPersist, kDeepPersist, kFlush, kDrain, kRead, kSetAttr, kClose };

// Where a call goes.
enum class Admit : uint8_t {
  kTarget,  // to the lanes (or the control channel)
  kLocal,   // nowhere: it completes locally (the pool is behind)
  kRefuse,  // it fails, with the errno and message of this state
};

struct PoolHooks {
  // Losing the target runs ahead: false when it cannot (the pool is lost
  // then). Under the transition's mutex.
  std::function<bool(const std::string &why)> prepare_behind;
  // What losing the target does besides the state (every lane shut down,
  // so that calls waiting on them return now): lost or behind.
  std::function<void(bool behind)> on_lost;
};

class PoolLife {
 public:
  // `run_ahead`: RPMEM_ON_LOSS=continue.
  PoolLife(bool run_ahead, PoolHooks hooks) : run_ahead_(run_ahead), hooks_(std::move(hooks)) {}

  PoolState state() const noexcept { return state_.load(std::memory_order_acquire); }
  bool runs_ahead() const noexcept { return run_ahead_; }
  // The gate of `call`. kRefuse: `err` is its errno, the message set
  // (rpmem_errormsg).
  Admit admit(PoolCall call, int &err) const noexcept;
  // The words of `call` failed because the pool is lost (the call itself
  // saw the loss, or found it at the gate): its errno (ECONNRESET), the
  // message set.
  int lost_error(PoolCall call) const noexcept;

  // A call that completes locally while the pool is behind: runs `mark`
  // (what the call covers goes into the out-of-sync map) and is true while
  // the pool is behind; false when it is not any more (the caller goes to
  // the target). catching_up() waits for every such call under way.
  template <class Mark>
  bool while_behind(Mark &&mark) noexcept {
    local_calls_.fetch_add(1);
    const bool behind = state_.load() == PoolState::kBehind;
    if (behind) mark();
    local_calls_.fetch_sub(1);
    return behind;
  }

  // A call whose lane failed as the target was lost: runs `mark` (what the
  // call covers goes into the out-of-sync map) and is true when the pool
  // runs ahead (behind, or catching up already: the catch-up sends what is
  // marked); false when it does not (lost, or in sync again). caught_up()
  // waits for every such call under way.
  template <class Mark>
  bool ran_ahead(Mark &&mark) noexcept {
    local_calls_.fetch_add(1);
    const PoolState s = state_.load();
    const bool ahead = s == PoolState::kBehind || s == PoolState::kCatchingUp;
    if (ahead) mark();
    local_calls_.fetch_sub(1);
    return ahead;
  }

  // Transitions; each is false when the pool was not in a state it leaves
  // from (nothing happened).
  bool coming_back() noexcept;  // in sync -> coming back
  bool back() noexcept;         // coming back -> in sync
  // The target lost (`why`, the first cause stays): in sync, coming back or
  // catching up -> behind (running ahead) or lost; runs the hooks.
  bool lose(const std::string &why) noexcept;
  // behind -> catching up, once every call that completed locally is done.
  bool catching_up() noexcept;
  // catching up -> in sync; then waits for every call under way that ran
  // ahead (the caller sends what they marked).
  bool caught_up() noexcept;
  // A pool opened whose replica its record says is behind: in sync ->
  // behind, no hook (nothing was sent yet).
  bool opened_behind() noexcept;
  void close() noexcept;  // -> closed

  // The cause of the loss ("Connection reset by peer" when none was named).
  std::string lost_why() const;

 private:
  bool move(PoolState from, PoolState to) noexcept;

  const bool run_ahead_;
  PoolHooks hooks_;
  std::atomic<PoolState> state_{PoolState::kInSync};
  std::atomic<int> local_calls_{0};  // calls completing locally, under way
  mutable std::mutex mu_;            // transitions, why_
  std::string why_;
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_POOL_LIFE_H
