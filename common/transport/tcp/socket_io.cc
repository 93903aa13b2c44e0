// SPDX-License-Identifier: BSD-3-Clause
// Bounded socket I/O: try the call first, poll only when it would block.
#include "common/transport/tcp/socket_io.h"

#include "common/error.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace rpmem::transport::tcp {

using Clock = std::chrono::steady_clock;

std::error_code wait_for(int fd, short events, int timeout_ms,
                         Clock::time_point deadline) noexcept {
  for (;;) {
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return errc(ETIMEDOUT);
      wait_ms = static_cast<int>(left.count());
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, wait_ms);
    if (rc > 0) return {};
    if (rc == 0) return errc(ETIMEDOUT);
    if (errno != EINTR) return last_errc();
  }
}

Clock::time_point deadline_of(int timeout_ms) noexcept {
  return Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
}

void advance(iovec *&iov, int &n, size_t sent) noexcept {
  while (n > 0 && sent >= iov->iov_len) {
    sent -= iov->iov_len;
    ++iov;
    --n;
  }
  if (n > 0) {
    iov->iov_base = static_cast<char *>(iov->iov_base) + sent;
    iov->iov_len -= sent;
  }
}

std::error_code send_all(int fd, iovec *iov, int n, int timeout_ms) noexcept {
  auto deadline = deadline_of(timeout_ms);
  while (n > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (auto ec = wait_for(fd, POLLOUT, timeout_ms, deadline)) return ec;
        continue;
      }
      return io_error(errno);
    }
    advance(iov, n, static_cast<size_t>(sent));
    deadline = deadline_of(timeout_ms);  // progress restarts the clock
  }
  return {};
}

std::error_code send_nowait(int fd, iovec *&iov, int &n) noexcept {
  while (n > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {};
      return io_error(errno);
    }
    advance(iov, n, static_cast<size_t>(sent));
  }
  return {};
}

std::error_code send_all(int fd, const void *buf, size_t len, int timeout_ms) noexcept {
  iovec iov{const_cast<void *>(buf), len};
  return send_all(fd, &iov, 1, timeout_ms);
}

std::error_code recv_some(int fd, void *buf, size_t len, size_t &got, int timeout_ms) noexcept {
  auto deadline = deadline_of(timeout_ms);
  for (;;) {
    ssize_t r = ::recv(fd, buf, len, 0);
    if (r > 0) {
      got = static_cast<size_t>(r);
      return {};
    }
    if (r == 0) return errc(ECONNRESET);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (auto ec = wait_for(fd, POLLIN, timeout_ms, deadline)) return ec;
      continue;
    }
    return io_error(errno);
  }
}

std::error_code recv_all(int fd, void *buf, size_t len, int timeout_ms) noexcept {
  auto *p = static_cast<char *>(buf);
  while (len > 0) {
    size_t got = 0;
    if (auto ec = recv_some(fd, p, len, got, timeout_ms)) return ec;
    p += got;
    len -= got;
  }
  return {};
}

std::error_code recv_nowait(int fd, void *buf, size_t len, size_t &got) noexcept {
  got = 0;
  ssize_t r = ::recv(fd, buf, len, MSG_DONTWAIT);
  if (r > 0) {
    got = static_cast<size_t>(r);
    return {};
  }
  if (r == 0) return errc(ECONNRESET);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {};
  return io_error(errno);
}

size_t recv_spinning(int fd, void *buf, size_t len, std::chrono::nanoseconds budget) noexcept {
  const auto until = Clock::now() + budget;
  do {
    ssize_t r = ::recv(fd, buf, len, MSG_DONTWAIT);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 0;
    ::sched_yield();  // a peer thread on this CPU gets to answer
  } while (Clock::now() < until);
  return 0;
}

bool nap_until_readable(int fd, std::chrono::nanoseconds nap) noexcept {
  if (nap.count() <= 0) return false;
  const int slack = ::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (slack > 1) ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const timespec ts{static_cast<time_t>(nap.count() / 1000000000),
                    static_cast<long>(nap.count() % 1000000000)};
  pollfd p{fd, POLLIN, 0};
  const bool readable = ::ppoll(&p, 1, &ts, nullptr) > 0;
  if (slack > 1) ::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack), 0, 0, 0);
  return readable;
}

std::error_code wait_readable(int fd, int timeout_ms) noexcept {
  return wait_for(fd, POLLIN, timeout_ms, deadline_of(timeout_ms));
}

void set_nodelay(int fd) noexcept {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_peer_timeout(int fd, std::chrono::milliseconds timeout) noexcept {
  if (timeout.count() <= 0) return;
  // Probes start after a third of the bound and come every sixth of it: the
  // fourth one missed ends the connection at about the bound.
  const int secs = static_cast<int>(std::max<long long>(1, timeout.count() / 1000));
  const int idle = std::max(1, secs / 3), interval = std::max(1, secs / 6), count = 4;
  const int one = 1;
  const unsigned user_ms = static_cast<unsigned>(timeout.count());
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms));
}

void set_probes(int fd, bool on) noexcept {
  const int flag = on ? 1 : 0;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &flag, sizeof(flag));
  if (!on) return;
  const int idle = 1, interval = 1, count = 127;  // 127: the kernel's largest
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

bool link_unanswered(int fd) noexcept {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  return info.tcpi_retransmits >= 2 || info.tcpi_probes >= 2;
}

std::chrono::microseconds smoothed_rtt(int fd) noexcept {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return {};
  return std::chrono::microseconds(info.tcpi_rtt);
}

std::error_code set_nonblocking(int fd, bool on) noexcept {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return last_errc();
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) < 0) return last_errc();
  return {};
}

size_t bytes_buffered(int fd) noexcept {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? static_cast<size_t>(n) : 0;
}

bool tls_record_buffered(int fd) noexcept {
  uint8_t h[5];
  if (::recv(fd, h, sizeof(h), MSG_PEEK | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(h)))
    return false;
  const size_t len = (size_t{h[3]} << 8) | h[4];
  return bytes_buffered(fd) >= sizeof(h) + len;
}

bool peer_hung_up(int fd) noexcept {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace rpmem::transport::tcp
