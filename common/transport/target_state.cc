// SPDX-License-Identifier: BSD-3-Clause
// TargetState: a provider target's stop flag, wake-up descriptor and fatal report.
#include "common/transport/target_state.h"

#include "common/error.h"
#include "common/log.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rpmem::transport {

TargetState::TargetState(FatalFn on_fatal) : on_fatal_(std::move(on_fatal)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw SetupError(errno, std::string("eventfd failed: ") + strerror(errno));
}

TargetState::~TargetState() { ::close(wake_fd_); }

bool TargetState::request_stop() noexcept {
  if (stopping_.exchange(true)) return false;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  return true;
}

void TargetState::fatal(const std::string &why) noexcept {
  RPMEM_LOG_ERR("%s", why.c_str());
  if (fatal_sent_.exchange(true) || !on_fatal_) return;
  try {
    on_fatal_(why);
  } catch (...) {  // the session learns nothing more; the lanes still stop
  }
}

void TargetState::lane_in(unsigned nlanes) noexcept {
  if (lanes_in_.fetch_add(1) + 1 == nlanes)
    RPMEM_LOG_INFO("in-band connection established");  // PMDK's line, once all lanes are in
}

}  // namespace rpmem::transport
