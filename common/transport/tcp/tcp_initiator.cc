// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, client side.
#include "common/transport/tcp/tcp_initiator.h"

#include "common/log.h"
#include "common/text.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/connect.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tls_stream.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <openssl/crypto.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace rpmem::transport::tcp {

namespace {
// At most one client lane per two CPUs naps before it spins (WaitSpin::nap)
// and spins on to twice its waits; while more lanes of the process wait,
// the others spin from the start, as for a round trip. With 4 lanes on a
// 2-CPU machine, every lane napping made 4 KiB persists into a pool on a
// disk about 3 % slower; one lane napping, as fast as none.
using NapSlots = SpinSlots<struct Napping>;

// An encrypted lane's read reply comes frame by frame (a sealed frame or a
// TLS record), each within about the time the target takes to seal the
// next: the client spins this long for each (yielding at every turn, as for
// a reply) before it sleeps. Sleeping between frames, the target's send of
// each next frame had to wake the client: over sealed lanes, 1 MiB reads
// ran at a median 0.77x of this machine's limit against 0.86x spinning
// (6 alternating runs each; docs/performance.md).
constexpr std::chrono::microseconds kFrameSpin{100};
// Between two attempts to connect a lane again that fail at once (a
// refusal), the pause before the next.
constexpr std::chrono::milliseconds kDialPause{200};
}  // namespace

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

TcpInitiatorLane::TcpInitiatorLane(int fd, const uint8_t *local_base, int timeout_ms,
                                   unsigned work_queue_size, std::unique_ptr<ByteStream> tls,
                                   std::shared_ptr<const LaneDialer> dialer, unsigned lane)
    : fd_(fd),
      tls_(std::move(tls)),
      dialer_(std::move(dialer)),
      number_(lane),
      base_(local_base),
      timeout_ms_(timeout_ms),
      wq_(std::clamp(work_queue_size, 2u, kMaxWorkQueue)),
      hdrs_(new uint8_t[(wq_ + 1) * proto::kDataRequestSize]),
      iov_(new iovec[2 * (wq_ + 1)]) {}

TcpInitiatorLane::~TcpInitiatorLane() {
  if (!tls_) ::close(fd_);  // else the stream closes it
}

namespace {

// What a connection given up is called in the log and in a failure's text.
std::string cause_text(std::error_code ec) {
  return ec.value() == ENOLINK ? "the connection gets no answers" : ec.message();
}

}  // namespace

std::error_code TcpInitiatorLane::await(short events) noexcept {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        progress_ + std::chrono::milliseconds(timeout_ms_) - Clock::now());
    if (left.count() <= 0) return errc(ETIMEDOUT);
    const auto slice = dialer_ ? std::min(left, kStallCheck) : left;
    pollfd p{tls_ ? tls_->fd() : fd_, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(slice.count()));
    if (rc > 0) return {};
    if (rc < 0 && errno != EINTR) return last_errc();
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    if (!dialer_ || rc < 0) continue;
    // A wait this long: keepalive probes tell whether the target's host
    // still answers while we wait for its reply (every second, from a
    // second after the last packet).
    if (!keepalive_) {
      keepalive_ = true;
      set_probes(fd_, true);
    }
    if (link_unanswered(fd_)) return errc(ENOLINK);
  }
}

std::error_code TcpInitiatorLane::send_iov(iovec *iov, int n) noexcept {
  while (n > 0) {
    const int before = n;
    const size_t first = iov->iov_len;
    std::error_code ec =
        tls_ ? tls_->send_nowait(iov, n) : transport::tcp::send_nowait(fd_, iov, n);
    if (ec) return ec;
    if (n != before || (n > 0 && iov->iov_len != first)) moved();
    if (n > 0)
      if (auto wait = await(POLLOUT)) return wait;
  }
  return {};
}

std::error_code TcpInitiatorLane::recv_exact(void *buf, size_t len) noexcept {
  auto *p = static_cast<uint8_t *>(buf);
  while (len > 0) {
    size_t got = 0;
    std::error_code ec = tls_ ? tls_->recv_scratch_nowait(p, len, got)
                              : transport::tcp::recv_nowait(fd_, p, len, got);
    if (ec) return ec;
    if (got > 0) {
      moved();
      p += got;
      len -= got;
    } else if (auto wait = await(POLLIN)) {
      return wait;
    }
  }
  return {};
}

void TcpInitiatorLane::shutdown() noexcept {
  // Under fd_mu_: the lane's own thread may be swapping in a new connection
  // (come_back), and the old number may already name another file.
  std::lock_guard lock(fd_mu_);
  dead_.store(true, std::memory_order_relaxed);
  ::shutdown(fd_, SHUT_RDWR);
}

std::error_code TcpInitiatorLane::fail(std::error_code ec) noexcept {
  // After a failed send or receive the stream position is unknown: the lane
  // cannot be used again.
  if (ec == std::errc::timed_out) {
    why_ = no_answer_text(std::chrono::milliseconds(timeout_ms_));
    RPMEM_LOG_ERR("data lane %u: %s", number_, why_.c_str());
  } else if (ec.value() == EPROTO) {
    why_ = "malformed reply from the target";
  } else if (!dialer_ || why_.empty()) {
    why_ = ec.message();
  }
  shutdown();
  if (ec.value() == EPROTO) return ec;
  return errc(ECONNRESET);
}

template <class Attempt>
std::error_code TcpInitiatorLane::with_comeback(Attempt &&attempt) noexcept {
  if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
  moved();
  for (;;) {
    std::error_code ec = attempt();
    if (!ec) break;
    if (ec.value() == EPROTO || ec == std::errc::timed_out || !dialer_ ||
        dead_.load(std::memory_order_relaxed))
      return fail(ec);
    if (auto lost = come_back(ec)) return fail(lost);
  }
  if (keepalive_) {
    keepalive_ = false;
    set_probes(fd_, false);
  }
  return {};
}

std::error_code TcpInitiatorLane::come_back(std::error_code cause) noexcept {
  std::string last = cause_text(cause);
  RPMEM_LOG_WARN("data lane %u: %s; connecting again", number_, last.c_str());
  const auto stalled_since = progress_;
  for (;;) {
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    const auto start = Clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        stalled_since + std::chrono::milliseconds(timeout_ms_) - start);
    if (left.count() <= 0 || epoch_ == UINT16_MAX) {
      why_ = no_answer_text(std::chrono::milliseconds(timeout_ms_)) + " (last try: " + last + ")";
      RPMEM_LOG_ERR("data lane %u: %s", number_, why_.c_str());
      return errc(ECONNRESET);
    }
    auto conn = dialer_->dial(number_, ++epoch_, std::min(left, kDialTry));
    if (conn) {
      // The new connection in, the old one out: from now on every byte
      // goes on the new one.
      std::unique_ptr<ByteStream> old;
      {
        std::lock_guard lock(fd_mu_);
        if (dead_.load(std::memory_order_relaxed)) {
          if (!conn->stream) ::close(conn->fd);
          return errc(ECONNRESET);
        }
        old = std::move(tls_);
        if (!old) ::close(fd_);
        fd_ = conn->fd;
        tls_ = std::move(conn->stream);
      }
      keepalive_ = false;
      queued_ = 0;
      niov_ = 0;
      moved();
      RPMEM_LOG_NOTICE("data lane %u: connected again (epoch %u) after %lld ms", number_,
                       static_cast<unsigned>(epoch_),
                       static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  Clock::now() - stalled_since)
                                                  .count()));
      // The flushes since the last drain, in batches of the work queue: the
      // target may have lost them with the old connection.
      std::error_code ec;
      const auto &ranges = unacked_.ranges();
      for (size_t i = 0; i < ranges.size() && !ec; ++i) {
        enqueue(proto::DataRequest{DataOp::kFlush, 0, ranges[i].offset, ranges[i].length},
                queued_++);
        if (queued_ == wq_ || i + 1 == ranges.size()) ec = post(nullptr);
      }
      if (!ec) return {};
      last = cause_text(ec);
      continue;
    }
    last = conn.error().message;
    RPMEM_LOG_DEBUG("data lane %u: %s", number_, last.c_str());
    // A refusal comes at once: the next try a little later.
    const auto next = start + kDialPause;
    while (Clock::now() < next && !dead_.load(std::memory_order_relaxed))
      std::this_thread::sleep_for(std::min<Clock::duration>(next - Clock::now(), kDialPause));
  }
}

void TcpInitiatorLane::enqueue(const proto::DataRequest &req, unsigned slot) noexcept {
  uint8_t(&hdr)[proto::kDataRequestSize] = *reinterpret_cast<uint8_t(*)[proto::kDataRequestSize]>(
      hdrs_.get() + slot * proto::kDataRequestSize);
  proto::encode(req, hdr);
  iov_[niov_++] = {hdr, sizeof(hdr)};
  if (proto::carries_payload(req.op) && req.length > 0)
    iov_[niov_++] = {const_cast<uint8_t *>(base_ + req.offset), req.length};
}

std::error_code TcpInitiatorLane::post(const proto::DataRequest *req) noexcept {
  if (req) enqueue(*req, wq_);
  const int n = niov_;
  queued_ = 0;
  niov_ = 0;
  if (n == 0) return {};
  return send_iov(iov_.get(), n);
}

std::error_code TcpInitiatorLane::exchange(const proto::DataRequest &req,
                                           proto::DataReply &reply) noexcept {
  if (auto ec = post(&req)) return ec;

  uint8_t raw[proto::kDataReplySize];
  // The reply usually comes within about the time the last ones took: spin
  // that long first (a round trip over loopback, a durable write when the
  // pool is on a disk), then sleep. When the replies take as long as a
  // device, the first half of that time is a nap (WaitSpin::nap), for one
  // lane per two CPUs at a time (NapSlots). The spin yields the CPU at every
  // turn, and there is none while spins keep missing the reply.
  const auto start = std::chrono::steady_clock::now();
  size_t have = 0;
  NapSlots::Hold napping;
  auto nap = spin_.nap();
  if (nap.count() > 0 && !napping.take()) nap = {};
  if (const auto budget = spin_.budget(nap); budget.count() > 0) {
    if (nap.count() > 0) spin_.napped(!nap_until_readable(fd_, nap));
    have = tls_ ? stream_recv_spinning(*tls_, raw, sizeof(raw), budget)
                : recv_spinning(fd_, raw, sizeof(raw), budget);
    spin_.spun(have > 0);
    if (have > 0) moved();
  }
  if (have < sizeof(raw))
    if (auto ec = recv_exact(raw + have, sizeof(raw) - have)) return ec;
  spin_.took(std::chrono::steady_clock::now() - start);
  auto decoded = proto::decode_data_reply(raw);
  if (!decoded || decoded->op != req.op ||
      (decoded->length != 0 &&
       (req.op != DataOp::kRead || decoded->status != 0 || decoded->length != req.length))) {
    RPMEM_LOG_ERR("data lane %u: malformed reply", number_);
    return errc(EPROTO);
  }
  reply = *decoded;
  return {};
}

std::error_code TcpInitiatorLane::write(DataOp op, uint64_t offset, uint64_t length,
                                        bool relaxed) noexcept {
  proto::DataRequest req{op, static_cast<uint8_t>(relaxed ? proto::kDataRelaxed : 0), offset,
                         length};
  if (op == DataOp::kFlush) {
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    if (dialer_) unacked_.add(offset, length);
    if (queued_ == wq_)
      if (auto ec = with_comeback([&] { return post(nullptr); })) return ec;
    enqueue(req, queued_++);
    return {};
  }
  proto::DataReply reply;
  if (auto ec = with_comeback([&] { return exchange(req, reply); })) return ec;
  return reply.status ? errc(static_cast<int>(reply.status)) : std::error_code{};
}

std::error_code TcpInitiatorLane::drain() noexcept {
  proto::DataRequest req{DataOp::kDrain, 0, 0, 0};
  proto::DataReply reply;
  if (auto ec = with_comeback([&] { return exchange(req, reply); })) return ec;
  if (reply.status) return errc(static_cast<int>(reply.status));
  unacked_.clear();  // every flush before it is durable
  return {};
}

std::error_code TcpInitiatorLane::read(void *dst, uint64_t offset, uint64_t length) noexcept {
  std::error_code status;
  if (auto ec = with_comeback([&] {
        status.clear();
        return read_once(dst, offset, length, status);
      }))
    return ec;
  return status;
}

std::error_code TcpInitiatorLane::read_once(void *dst, uint64_t offset, uint64_t length,
                                            std::error_code &status) noexcept {
  proto::DataRequest req{DataOp::kRead, 0, offset, length};
  proto::DataReply reply;
  if (auto ec = exchange(req, reply)) return ec;
  if (reply.status) {
    status = errc(static_cast<int>(reply.status));
    return {};
  }
  auto *p = static_cast<uint8_t *>(dst);
  size_t have = 0;
  // In all, the spins last the lane's timeout at most: a target that sends
  // a small frame every 99 us is then waited for asleep.
  const auto spin_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  while (tls_ && have < length && std::chrono::steady_clock::now() < spin_end) {
    const size_t got = stream_recv_spinning(*tls_, p + have, length - have, kFrameSpin);
    if (got == 0) break;  // nothing within kFrameSpin, or an error: recv_exact says which
    moved();
    have += got;
  }
  if (have < length) return recv_exact(p + have, length - have);
  return {};
}

namespace {

// Connects one socket to any of the endpoints within the timeout; returns
// the native descriptor, or -1 with ec set.
int connect_one(asio::io_context &io, const tcp::resolver::results_type &endpoints,
                std::chrono::milliseconds timeout, std::error_code &ec) {
  tcp::socket sock(io);
  const boost::system::error_code result = connect_racing(io, sock, endpoints, timeout);
  if (result == asio::error::timed_out) {
    ec = errc(ETIMEDOUT);
    return -1;
  }
  if (result) {
    ec = errc(result.value());
    return -1;
  }
  return sock.release();
}

}  // namespace

struct LaneDialer::Endpoints {
  tcp::resolver::results_type list;
  uint16_t port = 0;  // the one `list` has
};

LaneDialer::LaneDialer(const InitiatorParams &params) : params_(params) {}

LaneDialer::~LaneDialer() {
  OPENSSL_cleanse(params_.seal.master.data(), params_.seal.master.size());
}

std::error_code LaneDialer::resolve_locked(uint16_t port, std::string &why) const {
  asio::io_context io;
  tcp::resolver resolver(io);
  boost::system::error_code rerr;
  auto endpoints =
      resolver.resolve(params_.host, std::to_string(port), tcp::resolver::numeric_service, rerr);
  if (rerr) {
    why = "cannot resolve '" + params_.host + "': " + rerr.message();
    return errc(EHOSTUNREACH);
  }
  endpoints_->list = std::move(endpoints);
  endpoints_->port = port;
  return {};
}

Result<std::shared_ptr<LaneDialer>> LaneDialer::make(const InitiatorParams &params) {
  std::shared_ptr<LaneDialer> d(new LaneDialer(params));
  d->endpoints_ = std::make_unique<Endpoints>();
  std::string why;
  std::lock_guard lock(d->endpoints_mu_);
  if (auto ec = d->resolve_locked(params.port, why)) return Error{ec, why};
  return d;
}

Result<LaneDialer::Connection> LaneDialer::dial(unsigned i, uint16_t epoch,
                                                std::chrono::milliseconds timeout) const {
  const int timeout_ms = static_cast<int>(timeout.count());
  // Where the session is now: it moves when the client reopens its pool on
  // a restarted service.
  LaneRoute::Where route{params_.port, params_.secret, params_.seal.master};
  if (params_.route) route = params_.route->get();
  LaneSeal seal = params_.seal;
  seal.master = route.master;
  struct Cleanse {
    LaneSeal &s;
    LaneRoute::Where &r;
    ~Cleanse() {
      OPENSSL_cleanse(s.master.data(), s.master.size());
      OPENSSL_cleanse(r.master.data(), r.master.size());
    }
  } cleanse{seal, route};
  const auto where = params_.host + ":" + std::to_string(route.port);
  tcp::resolver::results_type endpoints;
  {
    std::lock_guard lock(endpoints_mu_);
    std::string why;
    if (route.port != endpoints_->port)
      if (auto rec = resolve_locked(route.port, why)) return Error{rec, why};
    endpoints = endpoints_->list;
  }
  asio::io_context io;
  std::error_code ec;
  int fd = connect_one(io, endpoints, timeout, ec);
  if (fd < 0) {
    std::string why = ec.message();
    if (ec.value() == EMFILE || ec.value() == ENFILE)
      why += " (RLIMIT_NOFILE too low for " + std::to_string(params_.nlanes) + " lanes)";
    return Error{ec, "cannot connect lane " + std::to_string(i) + " to " + where + ": " + why};
  }
  set_nodelay(fd);
  if (auto err = set_nonblocking(fd, true)) {
    ::close(fd);
    return Error{err, "cannot set up lane " + std::to_string(i)};
  }
  Connection c;
  c.fd = fd;
  if (params_.seal) {
    c.stream = SealedStream::client(fd, seal, i, epoch);  // owns fd from here
    if (i == 0 && epoch == 0) RPMEM_LOG_INFO("data lanes: sealed, AES-128-GCM frames");
  } else if (params_.tls) {
    std::string why;
    SSL *ssl = SSL_new(params_.tls.ctx.get());
    if (!ssl) {
      ::close(fd);
      return Error{errc(ENOMEM), "lane " + std::to_string(i) + ": SSL_new failed"};
    }
    c.stream = std::make_unique<TlsStream>(ssl, fd);  // owns both from here
    if (!attach_socket(ssl, fd))
      return Error{errc(ENOMEM), "lane " + std::to_string(i) + ": TLS setup failed"};
    SSL_set_connect_state(ssl);
    if (!params_.tls.server_name.empty()) {
      SSL_set_tlsext_host_name(ssl, params_.tls.server_name.c_str());
      SSL_set1_host(ssl, params_.tls.server_name.c_str());
    }
    if (auto herr = client_handshake(ssl, fd, timeout_ms, why))
      return Error{errc(ECONNRESET), "lane " + std::to_string(i) + ": TLS handshake with " + where +
                                         " failed: " + why};
    if (i == 0 && epoch == 0)
      RPMEM_LOG_INFO("data lanes: %s, %s, %s", SSL_get_version(ssl), SSL_get_cipher_name(ssl),
                     record_layer(ssl));
  }
  // A lane the caller does not get closes with its stream, or here.
  struct Closer {
    Connection &c;
    bool keep = false;
    ~Closer() {
      if (!keep && !c.stream) ::close(c.fd);
    }
  } closer{c};

  proto::LaneHello hello;
  hello.secret = route.secret;
  hello.lane = i;
  hello.epoch = epoch;
  hello.nlanes = params_.nlanes;
  uint8_t buf[proto::kLaneHelloSize];
  proto::encode(hello, buf);
  uint8_t reply[proto::kLaneHelloReplySize];
  iovec iov{buf, sizeof(buf)};
  ByteStream *stream = c.stream.get();
  std::error_code herr = stream ? stream_send_all(*stream, &iov, 1, timeout_ms)
                                : send_all(fd, buf, sizeof(buf), timeout_ms);
  if (!herr)
    herr = stream ? stream_recv_all(*stream, reply, sizeof(reply), timeout_ms)
                  : recv_all(fd, reply, sizeof(reply), timeout_ms);
  if (!herr && (reply[0] | reply[1] | reply[2] | reply[3]) != 0) herr = errc(EACCES);
  if (herr)
    return Error{herr == std::errc::timed_out ? herr : errc(ECONNRESET),
                 "lane " + std::to_string(i) + " refused by the target: " + herr.message()};
  closer.keep = true;
  return c;
}

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(const InitiatorParams &params) {
  auto dialer = LaneDialer::make(params);
  if (!dialer) return dialer.error();
  std::shared_ptr<const LaneDialer> shared = params.comeback ? dialer.value() : nullptr;
  const int timeout_ms = static_cast<int>(params.timeout.count());
  std::vector<std::unique_ptr<InitiatorLane>> lanes;
  lanes.reserve(params.nlanes);
  for (unsigned i = 0; i < params.nlanes; ++i) {
    auto c = dialer.value()->dial(i, 0, params.timeout);
    if (!c) {
      Error e = c.error();
      if (e.code == std::errc::timed_out) e.code = errc(ECONNRESET);
      return e;
    }
    lanes.push_back(std::make_unique<TcpInitiatorLane>(c->fd, params.local_base, timeout_ms,
                                                       params.work_queue_size, std::move(c->stream),
                                                       shared, i));
  }
  return lanes;
}

}  // namespace rpmem::transport::tcp
