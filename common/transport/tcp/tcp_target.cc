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
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>

namespace rpmem::transport::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kLaneBuffer = 256 * 1024;
constexpr unsigned kMaxPendingHellos = 64;
constexpr size_t kMaxPendingFlushes = 64;
// Requests a worker serves on one lane before it looks at its other lanes.
constexpr unsigned kBurst = 64;

// Buffered receive side of one lane connection (a blocking socket).
class LaneReader {
 public:
  // before_sleep, if set, runs whenever the lane is about to wait for input.
  LaneReader(int fd, std::function<void()> before_sleep)
      : fd_(fd), buf_(new uint8_t[kLaneBuffer]), before_sleep_(std::move(before_sleep)) {}

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

  size_t buffered() const { return w_ - r_; }

  // Takes what has arrived without waiting; `got` tells whether a request
  // (or part of one) is buffered. An error is kept: the lane is over.
  std::error_code try_fill(bool &got) {
    got = r_ < w_;
    if (got || error_) return error_;
    r_ = w_ = 0;
    size_t n = 0;
    error_ = recv_nowait(fd_, buf_.get(), kLaneBuffer, n);
    w_ = n;
    got = n > 0;
    return error_;
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
    if (spin_recv(got)) {
      w_ += got;
      return {};
    }
    if (before_sleep_) before_sleep_();
    if (auto ec = recv_some(fd_, buf_.get() + w_, kLaneBuffer - w_, got, kWaitForever)) return ec;
    w_ += got;
    return {};
  }

  // The next request of a busy lane (a flush after a flush, a persist
  // after its reply) comes within microseconds: poll for it before sleeping.
  bool spin_recv(size_t &got) {
    got = recv_spinning(fd_, buf_.get() + w_, kLaneBuffer - w_, kSpinBudget);
    return got > 0;
  }

  int fd_;
  std::unique_ptr<uint8_t[]> buf_;
  std::function<void()> before_sleep_;
  size_t r_ = 0, w_ = 0;
  std::error_code error_;  // of try_fill
};

// Flushed ranges not yet made durable, adjacent ones merged. The lane makes
// them durable before it sleeps waiting for input, at drain, when the table
// is full, and when it ends.
class PendingFlushes {
 public:
  bool empty() const { return n_ == 0; }
  bool full() const { return n_ == kMaxPendingFlushes; }
  void add(uint64_t offset, uint64_t length) {
    if (n_ > 0) {
      Range &last = ranges_[n_ - 1];
      if (offset <= last.offset + last.length && last.offset <= offset + length) {
        const uint64_t end = std::max(last.offset + last.length, offset + length);
        last.offset = std::min(last.offset, offset);
        last.length = end - last.offset;
        return;
      }
    }
    ranges_[n_++] = {offset, length};
  }
  // Persists every range; the first error is kept in `error` if it is clear.
  void persist(TargetPool &pool, std::error_code &error) {
    for (size_t i = 0; i < n_; ++i) {
      std::error_code ec = pool.persist(ranges_[i].offset, ranges_[i].length, false);
      if (ec && !error) error = ec;
    }
    n_ = 0;
  }

 private:
  struct Range {
    uint64_t offset, length;
  };
  Range ranges_[kMaxPendingFlushes];
  size_t n_ = 0;
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

// CPUs this process may run on (its affinity mask, which cpusets and
// taskset narrow), at least 1.
unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

namespace {

// One 8-byte store. atomic_ref keeps it one store: the compiler may not
// turn a loop of these into memcpy or into stores that split a word.
inline void store_word(uint8_t *dst, const uint8_t *src) noexcept {
  uint64_t w;
  std::memcpy(&w, src, 8);
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(dst)).store(w, std::memory_order_relaxed);
}

#if defined(__x86_64__)
// Four 16-byte-aligned 16-byte stores, each one instruction (inline asm, so
// that no compiler splits them) covering two whole words.
inline void store_64(uint8_t *dst, const uint8_t *src) noexcept {
  __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 16));
  __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 32));
  __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 48));
  auto *o = reinterpret_cast<__m128i *>(dst);
  asm("movdqa %1, %0" : "=m"(o[0]) : "x"(a));
  asm("movdqa %1, %0" : "=m"(o[1]) : "x"(b));
  asm("movdqa %1, %0" : "=m"(o[2]) : "x"(c));
  asm("movdqa %1, %0" : "=m"(o[3]) : "x"(d));
}
#endif

}  // namespace

void copy_words(uint8_t *dst, const uint8_t *src, size_t n) noexcept {
  while (n > 0 && reinterpret_cast<uintptr_t>(dst) % 8 != 0) {
    *dst++ = *src++;
    --n;
  }
#if defined(__x86_64__)
  // Vector stores copy large payloads about 1.5x faster than word stores.
  if (n >= 128) {
    for (; reinterpret_cast<uintptr_t>(dst) % 16 != 0; dst += 8, src += 8, n -= 8)
      store_word(dst, src);
    for (; n >= 64; dst += 64, src += 64, n -= 64) store_64(dst, src);
  }
#endif
  for (; n >= 8; dst += 8, src += 8, n -= 8) store_word(dst, src);
  while (n-- > 0) *dst++ = *src++;
}

// One lane, owned by one worker: its connection, its receive buffer and the
// flushes it has not made durable yet.
struct TcpTarget::Lane {
  Lane(int fd_, unsigned number_, TargetPool &pool_)
      : fd(fd_), number(number_), pool(pool_), in(fd_, [this] { flush_pending(); }) {}
  ~Lane() {  // what was flushed is made durable however the lane ends
    std::error_code ignored;
    pending.persist(pool, ignored);
  }
  Lane(const Lane &) = delete;
  Lane &operator=(const Lane &) = delete;

  // Flushes are made durable when the lane runs out of requests, so that a
  // burst of them costs one persist per run of adjacent ranges.
  void flush_pending() { pending.persist(pool, flush_error); }

  const int fd;
  const unsigned number;
  TargetPool &pool;
  std::error_code flush_error;  // reported by the next drain
  PendingFlushes pending;
  LaneReader in;
};

// A thread and the lanes it serves. New lanes come through the inbox.
struct TcpTarget::Worker {
  Worker() : wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~Worker() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
  Worker(const Worker &) = delete;
  Worker &operator=(const Worker &) = delete;
  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof(one));
  }

  const int wake_fd;
  std::atomic<bool> has_new{false};
  std::vector<std::pair<int, unsigned>> inbox;  // fd, lane; guarded by mu_
  std::thread thread;
};

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
    for (auto &w : workers_)
      if (w) w->wake();
  }
  for (auto &t : threads) t.join();  // after this, no worker is created
  for (auto &w : workers_)
    if (w) w->thread.join();
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
  hand_over(fd, hello->lane);
}

void TcpTarget::hand_over(int fd, unsigned lane) {
  std::lock_guard lock(mu_);
  if (stopping_.load()) {
    std::erase(fds_, fd);
    ::close(fd);
    return;
  }
  if (nworkers_ == 0) {
    const unsigned nlanes = session_nlanes_.load();
    const unsigned cap = params_.nthreads ? params_.nthreads : usable_cpus();
    nworkers_ = std::clamp(std::min(nlanes, cap), 1u, params_.max_lanes);
    workers_.resize(nworkers_);
    RPMEM_LOG_INFO("%u lanes served by %u worker thread%s", nlanes, nworkers_,
                   nworkers_ == 1 ? "" : "s");
  }
  auto &worker = workers_[lane % nworkers_];
  if (!worker) {
    worker = std::make_unique<Worker>();
    if (worker->wake_fd < 0) {
      worker.reset();
      std::erase(fds_, fd);
      ::close(fd);
      return fatal(std::string("lane worker: eventfd failed: ") + strerror(errno));
    }
    worker->thread = std::thread([this, w = worker.get()] { worker_loop(*w); });
  }
  worker->inbox.emplace_back(fd, lane);
  worker->has_new.store(true, std::memory_order_release);
  worker->wake();
}

void TcpTarget::worker_loop(Worker &worker) {
  std::vector<std::unique_ptr<Lane>> lanes;
  std::vector<pollfd> pfds;
  auto take_inbox = [&] {
    if (!worker.has_new.exchange(false, std::memory_order_acquire)) return;
    uint64_t count;
    [[maybe_unused]] auto n = ::read(worker.wake_fd, &count, sizeof(count));
    std::lock_guard lock(mu_);
    for (auto [fd, lane] : worker.inbox) lanes.push_back(std::make_unique<Lane>(fd, lane, pool_));
    worker.inbox.clear();
  };
  auto drop = [&](size_t i) {
    const int fd = lanes[i]->fd;
    lanes.erase(lanes.begin() + static_cast<ptrdiff_t>(i));  // persists its flushes first
    untrack(fd);
  };
  // Whether any lane has input (or an error to report) now.
  auto input_now = [&] {
    for (auto &lane : lanes) {
      bool got = false;
      if (lane->in.try_fill(got) || got) return true;
    }
    return false;
  };

  while (!stopping_.load(std::memory_order_relaxed)) {
    take_inbox();
    bool served = false;
    for (size_t i = 0; i < lanes.size();) {
      Lane &lane = *lanes[i];
      bool got = false;
      if (auto ec = lane.in.try_fill(got)) {
        end_lane(lane, ec);
        drop(i);
        continue;
      }
      bool alive = true;
      for (unsigned n = 0; alive && got && n<kBurst; ++n, got = lane.in.buffered()> 0) {
        alive = serve_request(lane);
        served = true;
      }
      if (!alive) {
        drop(i);
        continue;
      }
      ++i;
    }
    if (served) continue;

    // Nothing came: the next request of a busy lane comes within
    // microseconds, so poll for it before sleeping.
    bool ready = false;
    const auto until = std::chrono::steady_clock::now() + kSpinBudget;
    while (!ready && std::chrono::steady_clock::now() < until) {
      ::sched_yield();  // a peer thread on this CPU gets to answer
      ready = input_now();
    }
    if (ready) continue;

    for (auto &lane : lanes) lane->flush_pending();
    pfds.clear();
    for (auto &lane : lanes) pfds.push_back({lane->fd, POLLIN, 0});
    pfds.push_back({worker.wake_fd, POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0 && errno != EINTR) {
      fatal(std::string("lane worker: poll failed: ") + strerror(errno));
      break;
    }
  }
  while (!lanes.empty()) drop(lanes.size() - 1);
}

void TcpTarget::end_lane(const Lane &lane, std::error_code ec) {
  if (stopping_.load()) return;
  if (ec == std::errc::connection_reset)
    RPMEM_LOG_INFO("lane %u closed by the client", lane.number);
  else
    RPMEM_LOG_WARN("lane %u closed: %s", lane.number, ec.message().c_str());
}

bool TcpTarget::serve_request(Lane &lane) {
  uint8_t *const base = pool_.base();
  const size_t size = pool_.size();
  const size_t writable_from = pool_.writable_from();
  const unsigned number = lane.number;

  uint8_t hdr[proto::kDataRequestSize];
  if (auto ec = lane.in.read_exact(hdr, sizeof(hdr))) {
    end_lane(lane, ec);
    return false;
  }
  auto req = proto::decode_data_request(hdr);
  if (!req) {
    fatal("lane " + std::to_string(number) + ": malformed data request");
    return false;
  }
  const bool writes = proto::carries_payload(req->op);
  if ((writes || req->op == DataOp::kRead) &&
      (req->length > size || req->offset > size - req->length)) {
    fatal("lane " + std::to_string(number) + ": range outside the pool");
    return false;
  }
  if (writes && req->length > 0 && req->offset < writable_from) {
    fatal("lane " + std::to_string(number) + ": write into the pool header");
    return false;
  }

  proto::DataReply reply{0, req->op, 0};
  if (writes) {
    uint8_t *dst = base + req->offset;
    const bool atomic = !(req->flags & proto::kDataRelaxed);
    auto ec =
        atomic ? lane.in.read_atomic(dst, req->length) : lane.in.read_direct(dst, req->length);
    if (ec) {
      if (!stopping_.load())
        RPMEM_LOG_ERR("lane %u: payload lost: %s", number, ec.message().c_str());
      return false;
    }
    if (req->op == DataOp::kFlush) {
      if (req->length == 0) return true;
      if (lane.pending.full()) lane.flush_pending();
      lane.pending.add(req->offset, req->length);
      return true;
    }
    std::error_code perr = pool_.persist(req->offset, req->length, req->op == DataOp::kDeepPersist);
    reply.status = static_cast<uint32_t>(perr.value());
  } else if (req->op == DataOp::kDrain) {
    lane.flush_pending();
    reply.status = static_cast<uint32_t>(lane.flush_error.value());
    lane.flush_error.clear();
  } else {  // kRead
    reply.length = req->length;
  }
  uint8_t out[proto::kDataReplySize];
  proto::encode(reply, out);
  iovec iov[2] = {{out, sizeof(out)}, {base + req->offset, reply.length}};
  if (auto serr = send_all(lane.fd, iov, reply.length ? 2 : 1, kWaitForever)) {
    if (!stopping_.load())
      RPMEM_LOG_INFO("lane %u: reply lost: %s", number, serr.message().c_str());
    return false;
  }
  return true;
}

}  // namespace rpmem::transport::tcp
