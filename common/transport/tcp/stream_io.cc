// SPDX-License-Identifier: BSD-3-Clause
// Bounded waits over a ByteStream: try the call first, poll only when it
// would block.
#include "common/transport/tcp/stream_io.h"

#include "common/transport/tcp/socket_io.h"

#include <poll.h>
#include <sched.h>

#include <cstdint>

namespace rpmem::transport::tcp {

using Clock = std::chrono::steady_clock;

std::error_code stream_send_all(ByteStream &s, iovec *iov, int n, int timeout_ms) noexcept {
  const auto deadline = deadline_of(timeout_ms);
  while (n > 0) {
    if (auto ec = s.send_nowait(iov, n)) return ec;
    if (n > 0)
      if (auto ec = wait_for(s.fd(), POLLOUT, timeout_ms, deadline)) return ec;
  }
  return {};
}

std::error_code stream_recv_all(ByteStream &s, void *buf, size_t len, int timeout_ms) noexcept {
  const auto deadline = deadline_of(timeout_ms);
  auto *p = static_cast<uint8_t *>(buf);
  size_t have = 0;
  while (have < len) {
    size_t got = 0;
    if (auto ec = s.recv_scratch_nowait(p + have, len - have, got)) return ec;
    have += got;
    if (have < len && got == 0)
      if (auto ec = wait_for(s.fd(), POLLIN, timeout_ms, deadline)) return ec;
  }
  return {};
}

size_t stream_recv_spinning(ByteStream &s, void *buf, size_t len,
                            std::chrono::nanoseconds budget) noexcept {
  const auto until = Clock::now() + budget;
  do {
    size_t got = 0;
    if (s.recv_scratch_nowait(buf, len, got)) return 0;
    if (got > 0) return got;
    ::sched_yield();
  } while (Clock::now() < until);
  return 0;
}

}  // namespace rpmem::transport::tcp
