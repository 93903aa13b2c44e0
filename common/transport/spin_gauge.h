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

namespace rpmem::transport {

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

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_SPIN_GAUGE_H
