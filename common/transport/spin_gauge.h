// SPDX-License-Identifier: BSD-3-Clause
// Whether spinning pays. The data path polls for a while before it sleeps
// (for a reply, a completion, the next request), because a sleep and a
// wake-up cost each side several microseconds. That pays only when what it
// waits for usually comes within the spin. When it keeps coming later (a
// crowd of clients queued at one target, more busy threads than CPUs), the
// spin only takes the CPU from the threads that would answer: with 32
// clients on 2 CPUs, each spinning up to 200 us for replies that took
// 300 us, the clients held more of the CPUs than the daemon serving them.
//
// A SpinGauge keeps the share of recent spins that found their event (a
// moving average over about eight). Below three quarters the waiter sleeps
// at once, and spins on every 16th wait only, to see whether spinning
// would pay again. One per waiting thread; not thread-safe.
#ifndef RPMEM_COMMON_TRANSPORT_SPIN_GAUGE_H
#define RPMEM_COMMON_TRANSPORT_SPIN_GAUGE_H

#include <algorithm>
#include <atomic>
#include <chrono>

namespace rpmem::transport {

// How long the data path spins before it sleeps: about one loopback round
// trip.
inline constexpr std::chrono::nanoseconds kSpinBudget{20000};

class SpinGauge {
 public:
  // Whether this wait should spin before it sleeps.
  bool should_spin() noexcept { return caught_ >= kEnough || (++probes_ & 15) == 0; }
  // What a wait that spun found: its event within the spin, or not.
  void spun(bool caught) noexcept { caught_ = (7 * caught_ + (caught ? kAll : 0)) / 8; }

 private:
  static constexpr unsigned kAll = 256, kEnough = kAll * 3 / 4;
  unsigned caught_ = kAll;  // in 1/256ths
  unsigned probes_ = 0;
};

// CPUs this process may run on (its affinity mask, which cpusets and
// taskset narrow), at least 1.
unsigned usable_cpus() noexcept;

// How many threads of one kind (Kind: the class whose threads spin) may
// spin at once in this process: one per two CPUs it may run on, at least
// one. Past that a thread sleeps at once. A spinning thread keeps a CPU to
// itself; with one on every CPU, the threads that make the next requests
// (the clients' on the same machine, the session threads, the kernel's for
// a soft NIC) wait for a CPU instead. With 8 clients on one 2-CPU machine,
// one spinning lane server instead of two made 1.4x the calls/s.
template <class Kind>
class SpinSlots {
 public:
  // One thread's slot, while it holds one; given back at the latest when
  // the Hold ends (however the thread's loop is left).
  class Hold {
   public:
    Hold() = default;
    ~Hold() { release(); }
    Hold(const Hold &) = delete;
    Hold &operator=(const Hold &) = delete;
    // Whether this thread may spin: it holds a slot, or takes a free one.
    bool take() noexcept { return held_ || (held_ = SpinSlots::take()); }
    void release() noexcept {
      if (held_) SpinSlots::give_back();
      held_ = false;
    }

   private:
    bool held_ = false;
  };

  static bool take() noexcept {
    unsigned n = used_.load(std::memory_order_relaxed);
    while (n < limit()) {
      if (used_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  static void give_back() noexcept { used_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  static unsigned limit() noexcept {
    static const unsigned slots = std::max(1u, usable_cpus() / 2);
    return slots;
  }
  static inline std::atomic<unsigned> used_{0};
};

// How long a client lane spins for a reply or a completion: about as long
// as its recent waits took (1.25x their moving average; a round trip, or a
// durable write when the pool is on a disk), within [kMinSpin, kMaxSpin],
// and not at all while such spins keep missing (SpinGauge). One per lane;
// not thread-safe.
class WaitSpin {
 public:
  static constexpr std::chrono::nanoseconds kMinSpin = kSpinBudget;
  // For replies that usually take longer (a durable write to a disk).
  static constexpr std::chrono::nanoseconds kMaxSpin{200000};

  // Waits that take this long are a device's (a durable write to a disk),
  // not a round trip: they nap before they spin.
  static constexpr std::chrono::nanoseconds kNapFrom{100000};

  // The spin of this wait, after a nap of `nap` (see nap()); 0: sleep at
  // once, and no nap. Called once per wait. A wait that naps spins until
  // twice the average: its spin costs only the late replies' CPU, while a
  // durable write's tail is long, and a reply that comes after the spin
  // costs a wake-up on both sides (the lane server has stopped spinning for
  // the next request by then).
  std::chrono::nanoseconds budget(std::chrono::nanoseconds nap = {}) noexcept {
    if (!gauge_.should_spin()) return std::chrono::nanoseconds{0};
    const auto end = nap.count() > 0 ? 2 * took_ : took_ + took_ / 4;
    return std::clamp<std::chrono::nanoseconds>(end - nap, kMinSpin, kMaxSpin);
  }
  // How long a waiter that can sleep with a timer should sleep before it
  // spins: half the waits' moving average when they are a device's, else
  // nothing. Woken by its timer while the device still works, the waiter
  // pays its wake-up before the reply instead of after it, and leaves the
  // CPU to the threads doing the work meanwhile (the block layer's hybrid
  // polling sleeps half the mean too). Not while naps keep ending after
  // their event (napped()): where a wake-up costs about as long as the
  // wait (under emulation, a round trip of 200 us), a nap only adds one.
  // Called once per wait.
  std::chrono::nanoseconds nap() noexcept {
    if (took_ < kNapFrom || !nap_gauge_.should_spin()) return std::chrono::nanoseconds{0};
    return took_ / 2;
  }
  // Whether a nap ended before its event: woken by its timer, with the
  // event still to come.
  void napped(bool in_time) noexcept { nap_gauge_.spun(in_time); }
  // Whether a wait that spun found its event within the spin.
  void spun(bool caught) noexcept { gauge_.spun(caught); }
  // How long a wait took, from its start to its event.
  void took(std::chrono::nanoseconds t) noexcept { took_ = (3 * took_ + t) / 4; }

 private:
  SpinGauge gauge_;
  SpinGauge nap_gauge_;               // whether naps end before their event
  std::chrono::nanoseconds took_{0};  // moving average
};

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_SPIN_GAUGE_H
