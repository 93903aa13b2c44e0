// SPDX-License-Identifier: BSD-3-Clause
// What every provider's target keeps about its own life, the same for all:
// the stop flag and the wake-up descriptor that stops every thread's wait,
// the session's fatal report (once), and PMDK's "in-band connection
// established" line when the last lane of the session is in. Thread-safe.
#ifndef RPMEM_COMMON_TRANSPORT_TARGET_STATE_H
#define RPMEM_COMMON_TRANSPORT_TARGET_STATE_H

#include <atomic>
#include <functional>
#include <string>

namespace rpmem::transport {

class TargetState {
 public:
  using FatalFn = std::function<void(const std::string &why)>;

  // Throws SetupError when the wake-up descriptor cannot be had.
  explicit TargetState(FatalFn on_fatal);
  ~TargetState();
  TargetState(const TargetState &) = delete;
  TargetState &operator=(const TargetState &) = delete;

  // An eventfd (non-blocking) that is readable from request_stop() on and
  // stays so: every thread waiting on it wakes. Never read it.
  int wake_fd() const noexcept { return wake_fd_; }
  bool stopping() const noexcept { return stopping_.load(std::memory_order_relaxed); }
  // True for the first caller only, who then joins the threads.
  bool request_stop() noexcept;

  // Logs `why` as an error and, the first time only, tells the session.
  void fatal(const std::string &why) noexcept;

  // A lane of the session's `nlanes` is set up.
  void lane_in(unsigned nlanes) noexcept;

 private:
  FatalFn on_fatal_;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> fatal_sent_{false};
  std::atomic<unsigned> lanes_in_{0};
};

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_TARGET_STATE_H
