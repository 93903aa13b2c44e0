// SPDX-License-Identifier: BSD-3-Clause
// Raw mode: a TCP request/response and a TCP stream with the sizes of the cases.
#include "tools/rpmem-bench/raw.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace rpmem_bench {
namespace {

enum : uint32_t { kModeRr = 1, kModeSink = 2 };
constexpr size_t kHelloSize = 16;  // mode (u32), pad (u32), size (u64)
constexpr size_t kReplySize = 16;  // the size of rpmem's persist reply
constexpr size_t kSinkBuffer = size_t{1} << 20;

int send_all(int fd, const void *buf, size_t n) {
  auto *p = static_cast<const uint8_t *>(buf);
  while (n > 0) {
    ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return 0;
}

int recv_all(int fd, void *buf, size_t n) {
  auto *p = static_cast<uint8_t *>(buf);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r == 0) return ECONNRESET;
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return 0;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void serve(int fd) {
  set_nodelay(fd);
  uint8_t hello[kHelloSize];
  if (recv_all(fd, hello, sizeof(hello)) != 0) return;
  uint32_t mode;
  uint64_t size;
  std::memcpy(&mode, hello, 4);
  std::memcpy(&size, hello + 8, 8);
  if (mode == kModeRr) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[size]);
    uint8_t reply[kReplySize] = {};
    while (recv_all(fd, buf.get(), size) == 0 && send_all(fd, reply, sizeof(reply)) == 0) {
    }
  } else if (mode == kModeSink) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[kSinkBuffer]);
    uint64_t total = 0;
    for (;;) {
      ssize_t r = ::recv(fd, buf.get(), kSinkBuffer, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      total += static_cast<uint64_t>(r);
    }
    send_all(fd, &total, sizeof(total));
  }
}

}  // namespace

struct RawServer::Impl {
  int listen_fd = -1;
  int wake_fd = -1;
  std::thread acceptor;
  std::mutex mu;
  std::vector<int> fds;  // guarded by mu
  std::vector<std::thread> threads;

  void accept_loop() {
    for (;;) {
      pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
      if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
      if (p[1].revents) return;
      if (!(p[0].revents & POLLIN)) continue;
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mu);
      fds.push_back(fd);
      threads.emplace_back(serve, fd);
    }
  }
};

RawServer::RawServer() : impl_(std::make_unique<Impl>()) {
  impl_->listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (impl_->listen_fd < 0 || ::bind(impl_->listen_fd, reinterpret_cast<sockaddr *>(&sa), len) ||
      ::listen(impl_->listen_fd, 64) ||
      ::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr *>(&sa), &len))
    throw std::runtime_error(std::string("raw server: ") + std::strerror(errno));
  port_ = ntohs(sa.sin_port);
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC);
  impl_->acceptor = std::thread([this] { impl_->accept_loop(); });
}

RawServer::~RawServer() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(impl_->wake_fd, &one, sizeof(one));
  impl_->acceptor.join();
  {
    std::lock_guard lock(impl_->mu);
    for (int fd : impl_->fds) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto &t : impl_->threads) t.join();
  for (int fd : impl_->fds) ::close(fd);
  ::close(impl_->listen_fd);
  ::close(impl_->wake_fd);
}

RawClient::RawClient(uint16_t port, Op op, size_t size, unsigned lanes) : op_(op), size_(size) {
  for (unsigned l = 0; l < lanes; ++l) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("raw client: ") + std::strerror(errno));
    fds_.push_back(fd);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) != 0)
      throw std::runtime_error(std::string("raw client: connect: ") + std::strerror(errno));
    set_nodelay(fd);
    uint8_t hello[kHelloSize] = {};
    uint32_t mode = op == Op::kRawRr ? kModeRr : kModeSink;
    uint64_t sz = size;
    std::memcpy(hello, &mode, 4);
    std::memcpy(hello + 8, &sz, 8);
    if (int err = send_all(fd, hello, sizeof(hello)))
      throw std::runtime_error(std::string("raw client: ") + std::strerror(err));
    bufs_.emplace_back(new uint8_t[size]);
    std::memset(bufs_.back().get(), 0x5a, size);
  }
}

RawClient::~RawClient() {
  for (int fd : fds_) ::close(fd);
}

Workload RawClient::workload() {
  Workload w;
  if (op_ == Op::kRawRr) {
    w.op = [this](unsigned lane, uint64_t) {
      uint8_t reply[kReplySize];
      if (int err = send_all(fds_[lane], bufs_[lane].get(), size_)) return err;
      return recv_all(fds_[lane], reply, sizeof(reply));
    };
  } else {
    w.op = [this](unsigned lane, uint64_t) {
      return send_all(fds_[lane], bufs_[lane].get(), size_);
    };
    // The stream counts once the sink has received all of it.
    w.finish = [this](unsigned lane) {
      ::shutdown(fds_[lane], SHUT_WR);
      uint64_t total = 0;
      return recv_all(fds_[lane], &total, sizeof(total));
    };
  }
  return w;
}

}  // namespace rpmem_bench
