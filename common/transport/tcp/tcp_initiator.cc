// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, client side, the control path: connecting the lanes
// (LaneDialer: resolve, connect, seal or TLS, the lane hello), and a lane's
// coming back on a new connection; its requests are in
// tcp_initiator_datapath.cc.
#include "common/transport/tcp/tcp_initiator.h"

#include "common/log.h"
#include "common/text.h"
#include "common/transport/lane_proof.h"
#include "common/transport/tcp/connect.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tls_stream.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <openssl/crypto.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <thread>

namespace rpmem::transport::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

TcpInitiatorLane::TcpInitiatorLane(int fd, const uint8_t *local_base, int timeout_ms,
                                   unsigned work_queue_size, std::unique_ptr<ByteStream> tls,
                                   std::shared_ptr<const LaneDialer> dialer, unsigned lane,
                                   bool probes)
    : fd_(fd),
      tls_(std::move(tls)),
      dialer_(std::move(dialer)),
      number_(lane),
      base_(local_base),
      timeout_ms_(timeout_ms),
      probes_(probes),
      wq_(std::clamp(work_queue_size, 2u, kMaxWorkQueue)),
      hdrs_(new uint8_t[(wq_ + 1) * proto::kDataRequestSize]),
      iov_(new iovec[2 * (wq_ + 1)]) {}

TcpInitiatorLane::~TcpInitiatorLane() {
  if (probed_ > 0)
    RPMEM_LOG_INFO("data lane %u: %llu probes for late replies", number_,
                   static_cast<unsigned long long>(probed_));
  if (!tls_) ::close(fd_);  // else the stream closes it
}

namespace {

// Between two attempts to connect a lane again that fail at once (a
// refusal), the pause before the next.
constexpr std::chrono::milliseconds kDialPause{200};

// What a connection given up is called in the log and in a failure's text.
std::string cause_text(std::error_code ec) {
  return ec.value() == ENOLINK ? "the connection gets no answers" : ec.message();
}

}  // namespace

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
      owed_ = 0;  // the old connection's probes are answered there, or never
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

// Sets up a new lane connection's security: a sealed stream on c.fd, or a
// TLS handshake with the target within `timeout_ms`; nothing for a
// cleartext lane. On failure c.fd is closed (by c.stream once it owns it).
std::optional<Error> secure(const InitiatorParams &params, const LaneSeal &seal, unsigned i,
                            uint16_t epoch, const std::string &where, int timeout_ms,
                            LaneDialer::Connection &c) {
  const int fd = c.fd;
  if (params.seal) {
    c.stream = SealedStream::client(fd, seal, i, epoch);  // owns fd from here
    if (i == 0 && epoch == 0) RPMEM_LOG_INFO("data lanes: sealed, AES-128-GCM frames");
  } else if (params.tls) {
    std::string why;
    SSL *ssl = SSL_new(params.tls.ctx.get());
    if (!ssl) {
      ::close(fd);
      return Error{errc(ENOMEM), "lane " + std::to_string(i) + ": SSL_new failed"};
    }
    c.stream = std::make_unique<TlsStream>(ssl, fd);  // owns both from here
    if (!attach_socket(ssl, fd))
      return Error{errc(ENOMEM), "lane " + std::to_string(i) + ": TLS setup failed"};
    SSL_set_connect_state(ssl);
    if (!params.tls.server_name.empty()) {
      SSL_set_tlsext_host_name(ssl, params.tls.server_name.c_str());
      SSL_set1_host(ssl, params.tls.server_name.c_str());
    }
    if (auto herr = client_handshake(ssl, fd, timeout_ms, why))
      return Error{errc(ECONNRESET), "lane " + std::to_string(i) + ": TLS handshake with " + where +
                                         " failed: " + why};
    if (i == 0 && epoch == 0)
      RPMEM_LOG_INFO("data lanes: %s, %s, %s", SSL_get_version(ssl), SSL_get_cipher_name(ssl),
                     record_layer(ssl));
  }
  return std::nullopt;
}

// The lane hello (its proof of the session's secret, the lane, its epoch,
// the lanes in all) and the target's answer: EACCES for a refusal.
std::error_code send_lane_hello(const LaneDialer::Connection &c, const proto::Secret &secret,
                                bool mac, unsigned i, uint16_t epoch, unsigned nlanes,
                                int timeout_ms) {
  const int fd = c.fd;
  proto::LaneHello hello{.lane = i, .epoch = epoch, .nlanes = nlanes};
  if (auto ec = prove(secret, {i, epoch, nlanes}, mac, hello.proof)) return ec;
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
  if (!herr && proto::decode_lane_hello_reply(reply) != 0) herr = errc(EACCES);
  return herr;
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
  LaneRoute::Where route{params_.port, params_.secret, params_.seal.master, {}};
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
  if (auto err = secure(params_, seal, i, epoch, where, timeout_ms, c)) return *err;
  // A lane the caller does not get closes with its stream, or here.
  struct Closer {
    Connection &c;
    bool keep = false;
    ~Closer() {
      if (!keep && !c.stream) ::close(c.fd);
    }
  } closer{c};

  std::error_code herr =
      send_lane_hello(c, route.secret, params_.proofs, i, epoch, params_.nlanes, timeout_ms);
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
                                                       shared, i, params.probes));
  }
  return lanes;
}

}  // namespace rpmem::transport::tcp
