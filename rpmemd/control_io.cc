// SPDX-License-Identifier: BSD-3-Clause
// Frame I/O on the daemon's control channel over ssh's stdin and stdout.
#include "rpmemd/control_io.h"

#include "common/error.h"
#include "common/transport/tcp/socket_io.h"

#include <poll.h>
#include <unistd.h>

namespace rpmemd {

using rpmem::errc;

std::error_code wait_readable(int fd, const std::vector<int> &wake, int &woken) {
  std::vector<pollfd> fds{{fd, POLLIN, 0}};
  for (int w : wake) fds.push_back({w, POLLIN, 0});
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return rpmem::last_errc();
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents) {
        woken = fds[i].fd;
        return errc(EINTR);
      }
    }
    if (fds[0].revents) return {};
  }
}

std::error_code ControlIo::read_exact(uint8_t *buf, size_t n, int &woken) {
  while (n > 0) {
    if (auto ec = wait_readable(in_, wake_, woken)) return ec;
    ssize_t r = ::read(in_, buf, n);
    if (r == 0) return errc(ECONNRESET);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return rpmem::transport::tcp::io_error(errno);
    }
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return {};
}

std::error_code ControlIo::read_frame(proto::FrameHeader &hdr, proto::Bytes &payload, int &woken) {
  return read_frame_with([&](uint8_t *buf, size_t n) { return read_exact(buf, n, woken); }, hdr,
                         payload);
}

std::error_code ControlIo::write_all(const proto::Bytes &bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = ::write(out_, bytes.data() + off, bytes.size() - off);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return rpmem::transport::tcp::io_error(errno);
    }
    off += static_cast<size_t>(w);
  }
  return {};
}

}  // namespace rpmemd
