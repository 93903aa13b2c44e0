// SPDX-License-Identifier: BSD-3-Clause
// Raw mode: a TCP request/response and a TCP stream with the sizes of the cases.
//
// The request/response that rpmem is measured against (raw-rr) and the
// stream (raw-stream) wait the way rpmem's TCP transport waits, with the
// transport's own functions (common/transport/tcp/socket_io.h), so that the
// two cannot drift apart: the client sends on a non-blocking socket with
// TCP_NODELAY and spins for its reply (recv_spinning, kSpinBudget) before it
// blocks in poll; the server, like a lane worker of rpmemd, spins for the
// next request for kSpinBudget (non-blocking receives, yielding in between),
// then sleeps in poll. raw-rr-block is the plain blocking round trip: both
// sides block in recv.
#include "tools/rpmem-bench/raw.h"

#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/socket_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
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

namespace tcp = rpmem::transport::tcp;

enum : uint32_t { kModeRrBlock = 1, kModeSink = 2, kModeRr = 3 };
constexpr size_t kHelloSize = 16;  // mode (u32), pad (u32), size (u64)
constexpr size_t kReplySize = 16;  // the size of rpmem's persist reply
constexpr size_t kSinkBuffer = size_t{1} << 20;

// All n bytes from p on through `step` (a blocking send or recv of up to k
// bytes at p), again after EINTR: 0, the errno, or ECONNRESET on EOF.
template <typename Byte, typename Step>
int blocking_all(Byte *p, size_t n, Step step) {
  while (n > 0) {
    ssize_t r = step(p, n);
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

int blocking_send_all(int fd, const void *buf, size_t n) {
  return blocking_all(static_cast<const uint8_t *>(buf), n,
                      [fd](const uint8_t *p, size_t k) { return ::send(fd, p, k, MSG_NOSIGNAL); });
}

int blocking_recv_all(int fd, void *buf, size_t n) {
  return blocking_all(static_cast<uint8_t *>(buf), n,
                      [fd](uint8_t *p, size_t k) { return ::recv(fd, p, k, 0); });
}

// Receives between 1 and len bytes as a lane worker of rpmemd waits for a
// request: non-blocking receives for up to kSpinBudget, then poll. 0 on EOF
// or an error.
size_t recv_as_rpmemd(int fd, void *buf, size_t len) {
  for (;;) {
    if (size_t got = tcp::recv_spinning(fd, buf, len, rpmem::transport::kSpinBudget)) return got;
    if (tcp::wait_readable(fd, tcp::kWaitForever)) return 0;
    size_t got = 0;
    if (tcp::recv_nowait(fd, buf, len, got)) return 0;  // EOF, reset
    if (got) return got;
  }
}

bool recv_all_as_rpmemd(int fd, void *buf, size_t len) {
  auto *p = static_cast<uint8_t *>(buf);
  while (len > 0) {
    size_t got = recv_as_rpmemd(fd, p, len);
    if (got == 0) return false;
    p += got;
    len -= got;
  }
  return true;
}

void serve(int fd) {
  tcp::set_nodelay(fd);
  uint8_t hello[kHelloSize];
  if (blocking_recv_all(fd, hello, sizeof(hello)) != 0) return;
  uint32_t mode;
  uint64_t size;
  std::memcpy(&mode, hello, 4);
  std::memcpy(&size, hello + 8, 8);
  if (mode == kModeRrBlock) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[size]);
    uint8_t reply[kReplySize] = {};
    while (blocking_recv_all(fd, buf.get(), size) == 0 &&
           blocking_send_all(fd, reply, sizeof(reply)) == 0) {
    }
  } else if (mode == kModeRr) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[size]);
    uint8_t reply[kReplySize] = {};
    while (recv_all_as_rpmemd(fd, buf.get(), size) &&
           !tcp::send_all(fd, reply, sizeof(reply), tcp::kWaitForever)) {
    }
  } else if (mode == kModeSink) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[kSinkBuffer]);
    uint64_t total = 0;
    while (size_t got = recv_as_rpmemd(fd, buf.get(), kSinkBuffer)) total += got;
    blocking_send_all(fd, &total, sizeof(total));
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
    tcp::set_nodelay(fd);
    uint8_t hello[kHelloSize] = {};
    uint32_t mode = op == Op::kRawRrBlock ? kModeRrBlock : op == Op::kRawRr ? kModeRr : kModeSink;
    uint64_t sz = size;
    std::memcpy(hello, &mode, 4);
    std::memcpy(hello + 8, &sz, 8);
    if (int err = blocking_send_all(fd, hello, sizeof(hello)))
      throw std::runtime_error(std::string("raw client: ") + std::strerror(err));
    // As the transport's lanes: non-blocking, waits in poll (socket_io).
    if (op != Op::kRawRrBlock)
      if (auto ec = tcp::set_nonblocking(fd, true))
        throw std::runtime_error("raw client: " + ec.message());
    bufs_.emplace_back(new uint8_t[size]);
    std::memset(bufs_.back().get(), 0x5a, size);
  }
}

RawClient::~RawClient() {
  for (int fd : fds_) ::close(fd);
}

Workload RawClient::workload() {
  Workload w;
  if (op_ == Op::kRawRrBlock) {
    w.op = [this](unsigned lane, uint64_t) {
      uint8_t reply[kReplySize];
      if (int err = blocking_send_all(fds_[lane], bufs_[lane].get(), size_)) return err;
      return blocking_recv_all(fds_[lane], reply, sizeof(reply));
    };
  } else if (op_ == Op::kRawRr) {
    // As TcpInitiatorLane::exchange: send, spin for the reply, then poll.
    w.op = [this](unsigned lane, uint64_t) {
      const int fd = fds_[lane];
      uint8_t reply[kReplySize];
      if (auto ec = tcp::send_all(fd, bufs_[lane].get(), size_, tcp::kWaitForever))
        return ec.value();
      size_t have = tcp::recv_spinning(fd, reply, sizeof(reply), rpmem::transport::kSpinBudget);
      if (have < sizeof(reply))
        if (auto ec = tcp::recv_all(fd, reply + have, sizeof(reply) - have, tcp::kWaitForever))
          return ec.value();
      return 0;
    };
  } else {
    w.op = [this](unsigned lane, uint64_t) {
      auto ec = tcp::send_all(fds_[lane], bufs_[lane].get(), size_, tcp::kWaitForever);
      return ec.value();
    };
    // The stream counts once the sink has received all of it.
    w.finish = [this](unsigned lane) {
      ::shutdown(fds_[lane], SHUT_WR);
      uint64_t total = 0;
      auto ec = tcp::recv_all(fds_[lane], &total, sizeof(total), tcp::kWaitForever);
      return ec.value();
    };
  }
  return w;
}

}  // namespace rpmem_bench

namespace rpmem_bench {

namespace {
constexpr size_t kDiskHdr = 4096;  // as the rpmem cases: offsets start past the pool header
constexpr size_t kDiskPage = 4096;
}  // namespace

RawDisk::RawDisk(const std::string &dir, size_t file_size) : file_size_(file_size) {
  path_ = dir + "/rpmem-bench-raw-dsync." + std::to_string(::getpid());
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DSYNC | O_CLOEXEC, 0600);
  if (fd_ < 0) throw std::runtime_error("raw-dsync: " + path_ + ": " + std::strerror(errno));
  if (int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(file_size))) {
    ::close(fd_);
    ::unlink(path_.c_str());
    throw std::runtime_error("raw-dsync: allocating " + path_ + ": " + std::strerror(err));
  }
}

RawDisk::~RawDisk() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

Workload RawDisk::workload(size_t size, unsigned lanes, std::string &why) {
  Workload w;
  const size_t slice = (file_size_ - kDiskHdr) / lanes / kDiskPage * kDiskPage;
  const size_t slots = slice / size;
  if (slots == 0) {
    why = "block larger than a lane's slice of the file (--pool-size)";
    return w;
  }
  bufs_.clear();  // one buffer per lane, of this case's size
  for (unsigned l = 0; l < lanes; ++l) {
    bufs_.push_back(std::make_unique<uint8_t[]>(size));
    for (size_t i = 0; i < size; ++i) bufs_.back()[i] = static_cast<uint8_t>(i * 131 + l);
  }
  const int fd = fd_;
  std::vector<uint8_t *> bufs;
  for (auto &b : bufs_) bufs.push_back(b.get());
  w.op = [fd, bufs, slice, slots, size](unsigned lane, uint64_t i) {
    const off_t off = static_cast<off_t>(kDiskHdr + lane * slice + (i % slots) * size);
    bufs[lane][0] = static_cast<uint8_t>(i);
    for (size_t done = 0; done < size;) {
      const ssize_t n =
          ::pwrite(fd, bufs[lane] + done, size - done, off + static_cast<off_t>(done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      done += static_cast<size_t>(n);
    }
    return 0;
  };
  return w;
}

// The sealed lanes' own FrameCipher (common/transport/tcp/sealed_stream.cc,
// compiled in): the same calls per frame as a lane makes.
struct RawSeal::Lane {
  explicit Lane(const rpmem::transport::tcp::SealKey &key) : seal(key, true), open(key, false) {}
  rpmem::transport::tcp::FrameCipher seal, open;
  std::vector<uint8_t> plain, wire;
};

RawSeal::RawSeal() = default;
RawSeal::~RawSeal() = default;

Workload RawSeal::workload(size_t size, unsigned lanes, std::string &why) {
  using rpmem::transport::tcp::kMaxSealedFrame;
  using rpmem::transport::tcp::kSealedHeader;
  using rpmem::transport::tcp::kSealedTag;
  Workload w;
  lanes_.clear();
  const rpmem::transport::tcp::SealKey key = {1, 2,  3,  4,  5,  6,  7,  8,
                                              9, 10, 11, 12, 13, 14, 15, 16};
  const size_t frames = (size + kMaxSealedFrame - 1) / kMaxSealedFrame;
  for (unsigned l = 0; l < lanes; ++l) {
    auto lane = std::make_unique<Lane>(key);
    if (!lane->seal.ok() || !lane->open.ok()) {
      why = "OpenSSL: AES-128-GCM unavailable";
      return w;
    }
    lane->plain.resize(size);
    for (size_t i = 0; i < size; ++i) lane->plain[i] = static_cast<uint8_t>(i * 131 + l);
    lane->wire.resize(size + frames * (kSealedHeader + kSealedTag));
    lanes_.push_back(std::move(lane));
  }
  std::vector<Lane *> ls;
  for (auto &l : lanes_) ls.push_back(l.get());
  w.op = [ls, size](unsigned lane_no, uint64_t) {
    Lane &l = *ls[lane_no];
    uint8_t *out = l.wire.data();
    for (size_t at = 0; at < size; at += kMaxSealedFrame) {
      const size_t n = std::min(kMaxSealedFrame, size - at);
      const iovec iov{l.plain.data() + at, n};
      if (!l.seal.seal(&iov, 1, n, out)) return EIO;
      out += kSealedHeader + n + kSealedTag;
    }
    uint8_t *in = l.wire.data();  // opened in place, as a lane does
    for (size_t at = 0; at < size; at += kMaxSealedFrame) {
      const size_t n = std::min(kMaxSealedFrame, size - at);
      if (!l.open.open(in, kSealedHeader + n + kSealedTag)) return EBADMSG;
      in += kSealedHeader + n + kSealedTag;
    }
    return 0;
  };
  return w;
}

}  // namespace rpmem_bench
