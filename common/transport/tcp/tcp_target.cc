// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, target side.
#include "common/transport/tcp/tcp_target.h"

#include "common/log.h"
#include "common/transport/tcp/socket_io.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace rpmem::transport::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kLaneBuffer = 256 * 1024;
constexpr unsigned kMaxPendingHellos = 64;

// Buffered receive side of one lane connection (a blocking socket).
class LaneReader {
 public:
  explicit LaneReader(int fd) : fd_(fd), buf_(new uint8_t[kLaneBuffer]) {}

  std::error_code read_exact(void *out, size_t n) {
    auto *dst = static_cast<uint8_t *>(out);
    while (n > 0) {
      if (r_ == w_)
        if (auto ec = fill()) return ec;
      size_t take = std::min(n, w_ - r_);
      std::memcpy(dst, buf_.get() + r_, take);
      r_ += take;
      dst += take;
      n -= take;
    }
    return {};
  }

  // Payload straight into the pool: what is buffered first, then recv.
  std::error_code read_direct(uint8_t *dst, size_t n) {
    size_t take = std::min(n, w_ - r_);
    std::memcpy(dst, buf_.get() + r_, take);
    r_ += take;
    if (n == take) return {};
    return recv_all(fd_, dst + take, n - take, kWaitForever);
  }

  // Payload through the buffer, copied with whole-word stores. A chunk that
  // is not the last one ends on a word boundary of the destination, so no
  // word is ever written in two parts.
  std::error_code read_atomic(uint8_t *dst, size_t n) {
    while (n > 0) {
      size_t take = std::min(n, w_ - r_);
      if (take < n) take -= reinterpret_cast<uintptr_t>(dst + take) % 8;
      if (take > 0 && take <= w_ - r_) {
        copy_words(dst, buf_.get() + r_, take);
        r_ += take;
        dst += take;
        n -= take;
        continue;
      }
      if (auto ec = fill()) return ec;
    }
    return {};
  }

 private:
  std::error_code fill() {
    if (r_ == w_) {
      r_ = w_ = 0;
    } else if (r_ > 0) {
      std::memmove(buf_.get(), buf_.get() + r_, w_ - r_);
      w_ -= r_;
      r_ = 0;
    }
    size_t got = 0;
    if (auto ec = recv_some(fd_, buf_.get() + w_, kLaneBuffer - w_, got, kWaitForever)) return ec;
    w_ += got;
    return {};
  }

  int fd_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t r_ = 0, w_ = 0;
};

bool secrets_equal(const proto::Secret &a, const proto::Secret &b) {
  uint8_t diff = 0;  // constant time
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return "?";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr *>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  return std::string(host) + ":" + serv;
}

}  // namespace

void copy_words(uint8_t *dst, const uint8_t *src, size_t n) noexcept {
  while (n > 0 && reinterpret_cast<uintptr_t>(dst) % 8 != 0) {
    *dst++ = *src++;
    --n;
  }
  // atomic_ref keeps each word one 8-byte store: the compiler may not turn
  // the loop into memcpy or into stores that split a word.
  auto *d = reinterpret_cast<uint64_t *>(dst);
  for (; n >= 8; n -= 8, src += 8) {
    uint64_t w;
    std::memcpy(&w, src, 8);
    std::atomic_ref<uint64_t>(*d++).store(w, std::memory_order_relaxed);
  }
  dst = reinterpret_cast<uint8_t *>(d);
  while (n-- > 0) *dst++ = *src++;
}

TcpTarget::TcpTarget(TargetPool &pool, TargetParams params)
    : pool_(pool), params_(std::move(params)) {
  lane_taken_ = std::make_unique<std::atomic<bool>[]>(params_.max_lanes);
  asio::io_context io;
  tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  tcp::endpoint ep;
  if (params_.listen_address.empty()) {
    ep = tcp::endpoint(tcp::v6(), 0);
  } else {
    auto addr = asio::ip::make_address(params_.listen_address, ec);
    if (ec) throw SetupError(EINVAL, "bad listen address '" + params_.listen_address + "'");
    ep = tcp::endpoint(addr, 0);
  }
  acceptor.open(ep.protocol(), ec);
  if (ec && params_.listen_address.empty()) {  // no IPv6 here: any IPv4 address
    ep = tcp::endpoint(tcp::v4(), 0);
    acceptor.open(ep.protocol(), ec);
  }
  if (!ec && ep.protocol() == tcp::v6() && params_.listen_address.empty())
    acceptor.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw SetupError(ec.value(),
                     "cannot listen on '" + params_.listen_address + "': " + ec.message());
  port_ = acceptor.local_endpoint().port();
  listen_fd_ = acceptor.release();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    throw SetupError(errno, "eventfd failed");
  }
}

TcpTarget::~TcpTarget() {
  stop();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void TcpTarget::start() {
  acceptor_ = std::thread([this] { accept_loop(); });
}

void TcpTarget::stop() noexcept {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (auto &t : threads) t.join();
}

bool TcpTarget::track(int fd) {
  std::lock_guard lock(mu_);
  if (stopping_.load()) return false;
  fds_.push_back(fd);
  return true;
}

void TcpTarget::untrack(int fd) {
  std::lock_guard lock(mu_);
  std::erase(fds_, fd);
  ::close(fd);
}

void TcpTarget::fatal(const std::string &why) {
  RPMEM_LOG_ERR("%s", why.c_str());
  if (!fatal_sent_.exchange(true) && params_.on_fatal) params_.on_fatal(why);
}

void TcpTarget::accept_loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fatal(std::string("data listener: poll failed: ") + strerror(errno));
      return;
    }
    if (p[1].revents || stopping_.load()) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      RPMEM_LOG_WARN("data listener: accept failed: %s", strerror(errno));
      if (errno == EMFILE || errno == ENFILE) ::usleep(10000);
      continue;
    }
    if (pending_.load() >= kMaxPendingHellos) {
      RPMEM_LOG_WARN("data connection from %s dropped: too many pending", peer_name(fd).c_str());
      ::close(fd);
      continue;
    }
    if (!track(fd)) {
      ::close(fd);
      return;
    }
    ++pending_;
    std::lock_guard lock(mu_);
    threads_.emplace_back([this, fd] { serve_connection(fd); });
  }
}

void TcpTarget::serve_connection(int fd) {
  const std::string peer = peer_name(fd);
  const int timeout_ms = static_cast<int>(params_.hello_timeout.count());
  uint8_t buf[proto::kLaneHelloSize];
  std::error_code ec = set_nonblocking(fd, true);
  if (!ec) ec = recv_all(fd, buf, sizeof(buf), timeout_ms);
  --pending_;
  std::optional<proto::LaneHello> hello;
  if (!ec) hello = proto::decode_lane_hello(buf);
  const char *refusal = nullptr;
  if (ec)
    refusal = "no lane hello";
  else if (!hello || hello->major != proto::kMajor)
    refusal = "malformed lane hello";
  else if (!secrets_equal(hello->secret, params_.secret))
    refusal = "wrong session secret";
  else if (hello->nlanes > params_.max_lanes)
    refusal = "more lanes than granted";
  if (!refusal) {
    unsigned expected = 0;
    if (!session_nlanes_.compare_exchange_strong(expected, hello->nlanes) &&
        expected != hello->nlanes)
      refusal = "inconsistent lane count";
    else if (lane_taken_[hello->lane].exchange(true))
      refusal = "lane already connected";
  }
  if (refusal) {
    RPMEM_LOG_WARN("data connection from %s refused: %s", peer.c_str(), refusal);
    uint8_t no[proto::kLaneHelloReplySize] = {EACCES, 0, 0, 0, 0, 0, 0, 0};
    send_all(fd, no, sizeof(no), timeout_ms);
    untrack(fd);
    return;
  }
  uint8_t yes[proto::kLaneHelloReplySize] = {};
  ec = set_nonblocking(fd, false);
  if (!ec) ec = send_all(fd, yes, sizeof(yes), timeout_ms);
  if (ec) {
    RPMEM_LOG_WARN("lane %u from %s: %s", hello->lane, peer.c_str(), ec.message().c_str());
    untrack(fd);
    return;
  }
  set_nodelay(fd);
  RPMEM_LOG_INFO("lane %u of %u connected from %s", hello->lane, hello->nlanes, peer.c_str());
  lane_loop(fd, hello->lane);
  untrack(fd);
}

void TcpTarget::lane_loop(int fd, unsigned lane) {
  LaneReader in(fd);
  uint8_t *const base = pool_.base();
  const size_t size = pool_.size();
  const size_t writable_from = pool_.writable_from();
  std::error_code flush_error;  // reported by the next drain

  for (;;) {
    uint8_t hdr[proto::kDataRequestSize];
    if (auto ec = in.read_exact(hdr, sizeof(hdr))) {
      if (stopping_.load()) return;
      if (ec == std::errc::connection_reset)
        RPMEM_LOG_INFO("lane %u closed by the client", lane);
      else
        RPMEM_LOG_WARN("lane %u closed: %s", lane, ec.message().c_str());
      return;
    }
    auto req = proto::decode_data_request(hdr);
    if (!req) return fatal("lane " + std::to_string(lane) + ": malformed data request");
    const bool writes = proto::carries_payload(req->op);
    if ((writes || req->op == DataOp::kRead) &&
        (req->length > size || req->offset > size - req->length))
      return fatal("lane " + std::to_string(lane) + ": range outside the pool");
    if (writes && req->length > 0 && req->offset < writable_from)
      return fatal("lane " + std::to_string(lane) + ": write into the pool header");

    proto::DataReply reply{0, req->op, 0};
    std::error_code ec;
    if (writes) {
      uint8_t *dst = base + req->offset;
      const bool atomic = !(req->flags & proto::kDataRelaxed);
      ec = atomic ? in.read_atomic(dst, req->length) : in.read_direct(dst, req->length);
      if (ec) {
        if (!stopping_.load())
          RPMEM_LOG_ERR("lane %u: payload lost: %s", lane, ec.message().c_str());
        return;
      }
      std::error_code perr =
          pool_.persist(req->offset, req->length, req->op == DataOp::kDeepPersist);
      if (req->op == DataOp::kFlush) {
        if (perr && !flush_error) flush_error = perr;
        continue;
      }
      reply.status = static_cast<uint32_t>(perr.value());
    } else if (req->op == DataOp::kDrain) {
      reply.status = static_cast<uint32_t>(flush_error.value());
      flush_error.clear();
    } else {  // kRead
      reply.length = req->length;
    }
    uint8_t out[proto::kDataReplySize];
    proto::encode(reply, out);
    iovec iov[2] = {{out, sizeof(out)}, {base + req->offset, reply.length}};
    if (auto serr = send_all(fd, iov, reply.length ? 2 : 1, kWaitForever)) {
      if (!stopping_.load())
        RPMEM_LOG_INFO("lane %u: reply lost: %s", lane, serr.message().c_str());
      return;
    }
  }
}

}  // namespace rpmem::transport::tcp
