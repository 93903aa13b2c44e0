// SPDX-License-Identifier: BSD-3-Clause
// WriteBack's thread (write_back.h).
#include "rpmemd/write_back.h"

#include "common/log.h"

#include <algorithm>

namespace rpmemd {

WriteBack::WriteBack(rpmem::transport::Persister &persister, std::chrono::milliseconds bound)
    : persister_(persister), bound_(bound) {
  thread_ = std::thread([this] { run(); });
}

WriteBack::~WriteBack() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WriteBack::run() noexcept {
  const auto period = std::max(std::chrono::milliseconds(1), bound_ / 4);
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, period, [&] { return stop_; })) {
    lock.unlock();
    // An error is logged by the persister; the bytes stay counted as not
    // durable, and the next look tries again.
    const auto age = persister_.unpersisted_age();
    if (age >= bound_ / 2 && !persister_.write_back(bound_ / 2))
      RPMEM_LOG_INFO("visible bytes written back, the oldest %lld ms after its acknowledgement",
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::milliseconds>(age).count()));
    lock.lock();
  }
}

}  // namespace rpmemd
