// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, client side.
#include "common/transport/tcp/tcp_initiator.h"

#include "common/log.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/connect.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tls_stream.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

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
}  // namespace

namespace asio = boost::asio;
using asio::ip::tcp;

TcpInitiatorLane::TcpInitiatorLane(int fd, const uint8_t *local_base, int timeout_ms,
                                   unsigned work_queue_size, std::unique_ptr<ByteStream> tls)
    : fd_(fd),
      tls_(std::move(tls)),
      base_(local_base),
      timeout_ms_(timeout_ms),
      wq_(std::clamp(work_queue_size, 2u, kMaxWorkQueue)),
      hdrs_(new uint8_t[(wq_ + 1) * proto::kDataRequestSize]),
      iov_(new iovec[2 * (wq_ + 1)]) {}

TcpInitiatorLane::~TcpInitiatorLane() {
  if (!tls_) ::close(fd_);  // else the stream closes it
}

std::error_code TcpInitiatorLane::send_iov(iovec *iov, int n) noexcept {
  return tls_ ? stream_send_all(*tls_, iov, n, timeout_ms_) : send_all(fd_, iov, n, timeout_ms_);
}

std::error_code TcpInitiatorLane::recv_exact(void *buf, size_t len) noexcept {
  return tls_ ? stream_recv_all(*tls_, buf, len, timeout_ms_)
              : recv_all(fd_, buf, len, timeout_ms_);
}

void TcpInitiatorLane::shutdown() noexcept {
  dead_.store(true, std::memory_order_relaxed);
  ::shutdown(fd_, SHUT_RDWR);
}

std::error_code TcpInitiatorLane::fail(std::error_code ec) noexcept {
  // After a failed send or receive the stream position is unknown: the lane
  // cannot be used again.
  if (ec == std::errc::timed_out) RPMEM_LOG_ERR("data lane: no answer within %d ms", timeout_ms_);
  shutdown();
  if (ec.value() == EPROTO) return ec;
  return errc(ECONNRESET);
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
  if (auto ec = send_iov(iov_.get(), n)) return fail(ec);
  return {};
}

std::error_code TcpInitiatorLane::exchange(const proto::DataRequest &req,
                                           proto::DataReply &reply) noexcept {
  if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
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
  }
  if (have < sizeof(raw))
    if (auto ec = recv_exact(raw + have, sizeof(raw) - have)) return fail(ec);
  spin_.took(std::chrono::steady_clock::now() - start);
  auto decoded = proto::decode_data_reply(raw);
  if (!decoded || decoded->op != req.op ||
      (decoded->length != 0 &&
       (req.op != DataOp::kRead || decoded->status != 0 || decoded->length != req.length))) {
    RPMEM_LOG_ERR("data lane: malformed reply");
    return fail(errc(EPROTO));
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
    if (queued_ == wq_)
      if (auto ec = post(nullptr)) return ec;
    enqueue(req, queued_++);
    return {};
  }
  proto::DataReply reply;
  if (auto ec = exchange(req, reply)) return ec;
  return reply.status ? errc(static_cast<int>(reply.status)) : std::error_code{};
}

std::error_code TcpInitiatorLane::drain() noexcept {
  proto::DataRequest req{DataOp::kDrain, 0, 0, 0};
  proto::DataReply reply;
  if (auto ec = exchange(req, reply)) return ec;
  return reply.status ? errc(static_cast<int>(reply.status)) : std::error_code{};
}

std::error_code TcpInitiatorLane::read(void *dst, uint64_t offset, uint64_t length) noexcept {
  proto::DataRequest req{DataOp::kRead, 0, offset, length};
  proto::DataReply reply;
  if (auto ec = exchange(req, reply)) return ec;
  if (reply.status) return errc(static_cast<int>(reply.status));
  auto *p = static_cast<uint8_t *>(dst);
  size_t have = 0;
  // In all, the spins last the lane's timeout at most: a target that sends
  // a small frame every 99 us is then waited for asleep.
  const auto spin_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  while (tls_ && have < length && std::chrono::steady_clock::now() < spin_end) {
    const size_t got = stream_recv_spinning(*tls_, p + have, length - have, kFrameSpin);
    if (got == 0) break;  // nothing within kFrameSpin, or an error: recv_exact says which
    have += got;
  }
  if (have < length)
    if (auto ec = recv_exact(p + have, length - have)) return fail(ec);
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

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(const InitiatorParams &params) {
  const int timeout_ms = static_cast<int>(params.timeout.count());
  asio::io_context io;
  tcp::resolver resolver(io);
  boost::system::error_code rerr;
  auto endpoints = resolver.resolve(params.host, std::to_string(params.port),
                                    tcp::resolver::numeric_service, rerr);
  if (rerr)
    return Error{errc(EHOSTUNREACH), "cannot resolve '" + params.host + "': " + rerr.message()};

  std::vector<std::unique_ptr<InitiatorLane>> lanes;
  lanes.reserve(params.nlanes);
  for (unsigned i = 0; i < params.nlanes; ++i) {
    std::error_code ec;
    int fd = connect_one(io, endpoints, params.timeout, ec);
    if (fd < 0) {
      std::string why = ec.message();
      if (ec.value() == EMFILE || ec.value() == ENFILE)
        why += " (RLIMIT_NOFILE too low for " + std::to_string(params.nlanes) + " lanes)";
      return Error{ec.value() == ETIMEDOUT ? errc(ECONNRESET) : ec,
                   "cannot connect lane " + std::to_string(i) + " to " + params.host + ":" +
                       std::to_string(params.port) + ": " + why};
    }
    set_nodelay(fd);
    if (auto err = set_nonblocking(fd, true)) {
      ::close(fd);
      return Error{err, "cannot set up lane " + std::to_string(i)};
    }
    std::unique_ptr<ByteStream> tls;
    if (params.seal) {
      tls = SealedStream::client(fd, params.seal, i);  // owns fd from here
      if (i == 0) RPMEM_LOG_INFO("data lanes: sealed, AES-128-GCM frames");
    } else if (params.tls) {
      std::string why;
      SSL *ssl = SSL_new(params.tls.ctx.get());
      if (!ssl) {
        ::close(fd);
        return Error{errc(ENOMEM), "lane " + std::to_string(i) + ": SSL_new failed"};
      }
      tls = std::make_unique<TlsStream>(ssl, fd);  // owns both from here
      if (!attach_socket(ssl, fd))
        return Error{errc(ENOMEM), "lane " + std::to_string(i) + ": TLS setup failed"};
      SSL_set_connect_state(ssl);
      if (!params.tls.server_name.empty()) {
        SSL_set_tlsext_host_name(ssl, params.tls.server_name.c_str());
        SSL_set1_host(ssl, params.tls.server_name.c_str());
      }
      if (auto herr = client_handshake(ssl, fd, timeout_ms, why))
        return Error{errc(ECONNRESET), "lane " + std::to_string(i) + ": TLS handshake with " +
                                           params.host + ":" + std::to_string(params.port) +
                                           " failed: " + why};
      if (i == 0)
        RPMEM_LOG_INFO("data lanes: %s, %s, %s", SSL_get_version(ssl), SSL_get_cipher_name(ssl),
                       record_layer(ssl));
    }
    ByteStream *stream = tls.get();
    auto lane = std::make_unique<TcpInitiatorLane>(fd, params.local_base, timeout_ms,
                                                   params.work_queue_size, std::move(tls));

    proto::LaneHello hello;
    hello.secret = params.secret;
    hello.lane = i;
    hello.nlanes = params.nlanes;
    uint8_t buf[proto::kLaneHelloSize];
    proto::encode(hello, buf);
    uint8_t reply[proto::kLaneHelloReplySize];
    iovec iov{buf, sizeof(buf)};
    std::error_code herr = stream ? stream_send_all(*stream, &iov, 1, timeout_ms)
                                  : send_all(fd, buf, sizeof(buf), timeout_ms);
    if (!herr)
      herr = stream ? stream_recv_all(*stream, reply, sizeof(reply), timeout_ms)
                    : recv_all(fd, reply, sizeof(reply), timeout_ms);
    if (!herr && (reply[0] | reply[1] | reply[2] | reply[3]) != 0) herr = errc(EACCES);
    if (herr)
      return Error{errc(ECONNRESET),
                   "lane " + std::to_string(i) + " refused by the target: " + herr.message()};
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

}  // namespace rpmem::transport::tcp
