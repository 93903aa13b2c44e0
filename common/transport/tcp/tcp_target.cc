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
#include <system_error>

namespace rpmem::transport::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kLaneBuffer = 256 * 1024;
constexpr unsigned kMaxPendingHellos = 64;
constexpr size_t kMaxPendingFlushes = 64;
// Requests a worker serves on one lane before it looks at its other lanes.
constexpr unsigned kBurst = 64;

// Buffered receive side of one lane connection. It never waits: each call
// takes what has arrived, and an error (EOF included) is kept.
class LaneReader {
 public:
  explicit LaneReader(int fd) : fd_(fd), buf_(new uint8_t[kLaneBuffer]) {}

  size_t buffered() const { return w_ - r_; }
  const uint8_t *data() const { return buf_.get() + r_; }
  void consume(size_t n) { r_ += n; }

  // Appends what has arrived to what is buffered; `got`: bytes added.
  std::error_code fill(size_t &got) {
    got = 0;
    if (error_) return error_;
    if (r_ == w_) {
      r_ = w_ = 0;
    } else if (r_ > 0) {
      std::memmove(buf_.get(), buf_.get() + r_, w_ - r_);
      w_ -= r_;
      r_ = 0;
    }
    error_ = recv_nowait(fd_, buf_.get() + w_, kLaneBuffer - w_, got);
    w_ += got;
    return error_;
  }

  // Payload straight into the pool: what is buffered, then what has
  // arrived. `done`: bytes of dst written.
  std::error_code take_direct(uint8_t *dst, size_t n, size_t &done) {
    done = std::min(n, buffered());
    std::memcpy(dst, data(), done);
    consume(done);
    if (done == n || error_) return error_;
    size_t got = 0;
    error_ = recv_nowait(fd_, dst + done, n - done, got);
    done += got;
    return error_;
  }

  // Payload through the buffer, copied with whole-word stores. Until the
  // last byte has come, it stops at a word boundary of the destination and
  // keeps the bytes of a partly received word: no word is ever written in
  // two parts. `done`: bytes of dst written.
  std::error_code take_atomic(uint8_t *dst, size_t n, size_t &done) {
    done = 0;
    for (;;) {
      size_t take = std::min(n - done, buffered());
      if (take < n - done) {
        const size_t cut = reinterpret_cast<uintptr_t>(dst + done + take) % 8;
        take = take >= cut ? take - cut : 0;
      }
      if (take > 0) {
        copy_words(dst + done, data(), take);
        consume(take);
        done += take;
      }
      if (done == n) return {};
      size_t got = 0;
      if (auto ec = fill(got)) return ec;
      if (got == 0) return {};
    }
  }

 private:
  int fd_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t r_ = 0, w_ = 0;
  std::error_code error_;
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

// One lane, owned by one worker: its connection, its receive buffer, the
// request and the reply in progress, and the flushes it has not made
// durable yet.
struct TcpTarget::Lane {
  Lane(int fd_, unsigned number_, TargetPool &pool_)
      : fd(fd_), number(number_), pool(pool_), in(fd_) {}
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
  LaneReader in;
  std::error_code flush_error;  // reported by the next drain
  PendingFlushes pending;

  bool in_request = false;  // req's header has been taken
  proto::DataRequest req{};
  uint8_t *dst = nullptr;  // where the rest of the payload goes
  size_t left = 0;         // payload bytes still to come

  uint8_t reply[proto::kDataReplySize] = {};
  iovec iov[2] = {};
  iovec *unsent = iov;  // the reply still to send: unsent[0..nunsent)
  int nunsent = 0;
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
  untrack_locked(fd);
}

void TcpTarget::untrack_locked(int fd) {
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
    try {
      threads_.emplace_back([this, fd] { serve_connection(fd); });
    } catch (const std::system_error &e) {
      RPMEM_LOG_WARN("data connection dropped: cannot start a thread: %s", e.what());
      --pending_;
      untrack_locked(fd);
    }
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
  if (stopping_.load()) return untrack_locked(fd);
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
    std::string failure;
    worker = std::make_unique<Worker>();
    if (worker->wake_fd < 0) {
      failure = std::string("eventfd failed: ") + strerror(errno);
    } else {
      try {
        worker->thread = std::thread([this, w = worker.get()] { worker_loop(*w); });
      } catch (const std::system_error &e) {
        failure = std::string("cannot start a thread: ") + e.what();
      }
    }
    if (!failure.empty()) {
      worker.reset();
      untrack_locked(fd);
      return fatal("lane worker: " + failure);
    }
  }
  worker->inbox.emplace_back(fd, lane);
  worker->has_new.store(true, std::memory_order_release);
  worker->wake();
}

void TcpTarget::worker_loop(Worker &worker) {
  std::vector<std::unique_ptr<Lane>> lanes;
  std::vector<pollfd> pfds;
  auto adopt_inbox = [&] {
    std::lock_guard lock(mu_);
    for (auto [fd, lane] : worker.inbox) lanes.push_back(std::make_unique<Lane>(fd, lane, pool_));
    worker.inbox.clear();
  };
  auto take_inbox = [&] {
    if (worker.has_new.exchange(false, std::memory_order_acquire)) adopt_inbox();
  };
  auto drop = [&](size_t i) {
    const int fd = lanes[i]->fd;
    lanes.erase(lanes.begin() + static_cast<ptrdiff_t>(i));  // persists its flushes first
    untrack(fd);
  };
  // One step of every lane; true when any of them got anywhere.
  auto step_all = [&] {
    bool progress = false;
    for (size_t i = 0; i < lanes.size();) {
      const Step s = step(*lanes[i]);
      if (s == Step::kEnded) {
        drop(i);
        continue;
      }
      progress |= s == Step::kProgress;
      ++i;
    }
    return progress;
  };

  while (!stopping_.load()) {
    take_inbox();
    if (step_all()) continue;

    // Nothing moved: the next request of a busy lane, or room for a reply,
    // comes within microseconds, so poll for it before sleeping.
    bool progress = false;
    const auto until = std::chrono::steady_clock::now() + kSpinBudget;
    while (!progress && std::chrono::steady_clock::now() < until) {
      ::sched_yield();  // a peer thread on this CPU gets to answer
      progress = step_all();
    }
    if (progress) continue;

    for (auto &lane : lanes) lane->flush_pending();
    pfds.clear();
    for (auto &lane : lanes)
      pfds.push_back({lane->fd, static_cast<short>(lane->nunsent ? POLLOUT : POLLIN), 0});
    pfds.push_back({worker.wake_fd, POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), -1) < 0 && errno != EINTR) {
      fatal(std::string("lane worker: poll failed: ") + strerror(errno));
      break;
    }
    // A wake-up is taken only here, after poll saw it, and the loop then
    // looks at stopping_ and the inbox again. Taken anywhere else, the wake-up
    // of stop() could be eaten between that look and this poll, which would
    // then sleep for good.
    if (pfds.back().revents & POLLIN) {
      uint64_t count;
      [[maybe_unused]] auto n = ::read(worker.wake_fd, &count, sizeof(count));
    }
  }
  adopt_inbox();  // lanes handed over after the last look: closed like the others
  while (!lanes.empty()) drop(lanes.size() - 1);
}

TcpTarget::Step TcpTarget::step(Lane &lane) {
  bool progress = false;
  auto idle = [&] { return progress ? Step::kProgress : Step::kIdle; };
  auto ended = [&](const char *what, std::error_code ec) {
    if (stopping_.load()) return Step::kEnded;
    if (what)
      RPMEM_LOG_ERR("lane %u: %s: %s", lane.number, what, ec.message().c_str());
    else if (ec == std::errc::connection_reset)
      RPMEM_LOG_INFO("lane %u closed by the client", lane.number);
    else
      RPMEM_LOG_WARN("lane %u closed: %s", lane.number, ec.message().c_str());
    return Step::kEnded;
  };

  for (unsigned served = 0; served < kBurst;) {
    if (lane.nunsent > 0) {  // the last reply first
      if (auto ec = send_nowait(lane.fd, lane.unsent, lane.nunsent)) {
        if (!stopping_.load())
          RPMEM_LOG_INFO("lane %u: reply lost: %s", lane.number, ec.message().c_str());
        return Step::kEnded;
      }
      // The socket is full: nothing more until it drains (POLLOUT).
      if (lane.nunsent > 0) return idle();
    }

    if (!lane.in_request) {
      if (lane.in.buffered() < proto::kDataRequestSize) {
        size_t got = 0;
        auto ec = lane.in.fill(got);
        progress |= got > 0;
        if (lane.in.buffered() < proto::kDataRequestSize) return ec ? ended(nullptr, ec) : idle();
      }
      auto req = proto::decode_data_request({lane.in.data(), proto::kDataRequestSize});
      lane.in.consume(proto::kDataRequestSize);
      progress = true;
      auto refuse = [&](const char *why) {
        fatal("lane " + std::to_string(lane.number) + ": " + why);
        return Step::kEnded;
      };
      if (!req) return refuse("malformed data request");
      const bool writes = proto::carries_payload(req->op);
      if (writes || req->op == DataOp::kRead)
        if (const char *why = pool_.refusal(req->offset, req->length, writes)) return refuse(why);
      lane.req = *req;
      lane.in_request = true;
      lane.dst = pool_.base() + req->offset;
      lane.left = writes ? req->length : 0;
    }

    if (lane.left > 0) {
      size_t done = 0;
      auto ec = (lane.req.flags & proto::kDataRelaxed)
                    ? lane.in.take_direct(lane.dst, lane.left, done)
                    : lane.in.take_atomic(lane.dst, lane.left, done);
      lane.dst += done;
      lane.left -= done;
      progress |= done > 0;
      if (lane.left > 0) return ec ? ended("payload lost", ec) : idle();
    }

    lane.in_request = false;  // the request is whole: answer it
    ++served;
    complete(lane);
  }
  return Step::kProgress;
}

void TcpTarget::complete(Lane &lane) {
  const proto::DataRequest &req = lane.req;
  proto::DataReply reply{0, req.op, 0};
  if (proto::carries_payload(req.op)) {
    if (req.op == DataOp::kFlush) {  // no reply: made durable later
      if (req.length == 0) return;
      if (lane.pending.full()) lane.flush_pending();
      lane.pending.add(req.offset, req.length);
      return;
    }
    std::error_code perr = pool_.persist(req.offset, req.length, req.op == DataOp::kDeepPersist);
    reply.status = static_cast<uint32_t>(perr.value());
  } else if (req.op == DataOp::kDrain) {
    lane.flush_pending();
    reply.status = static_cast<uint32_t>(lane.flush_error.value());
    lane.flush_error.clear();
  } else {  // kRead: the reply carries the bytes
    reply.length = req.length;
  }
  proto::encode(reply, lane.reply);
  lane.iov[0] = {lane.reply, sizeof(lane.reply)};
  lane.iov[1] = {pool_.base() + req.offset, reply.length};
  lane.unsent = lane.iov;
  lane.nunsent = reply.length ? 2 : 1;
}

}  // namespace rpmem::transport::tcp
