// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, client side, the data path: a lane's requests (flushes
// posted and sent gathered, persists, drains and reads as round trips), its
// waits and its failure; connecting again is in tcp_initiator.cc.
#include "common/log.h"
#include "common/text.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tcp_initiator.h"
#include "common/transport/tcp/tls_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

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

using Clock = std::chrono::steady_clock;

std::error_code TcpInitiatorLane::await(short events) noexcept {
  const bool probing = probes_ && events == POLLIN;
  auto check_at = Clock::now() + kStallCheck;
  for (;;) {
    const auto now = Clock::now();
    const auto bound = progress_ + std::chrono::milliseconds(timeout_ms_);
    if (now >= bound) return errc(ETIMEDOUT);
    auto until = dialer_ ? std::min(bound, check_at) : bound;
    if (probing) until = std::min(until, probe_.due());
    const auto slice = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    pollfd p{tls_ ? tls_->fd() : fd_, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(slice.count(), 0)));
    if (rc > 0) return {};
    if (rc < 0 && errno != EINTR) return last_errc();
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    if (rc < 0) continue;
    const auto later = Clock::now();
    if (probing && later >= probe_.due())
      if (auto ec = probe(later)) return ec;
    if (!dialer_ || later < check_at) continue;
    check_at = later + kStallCheck;
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

std::error_code TcpInitiatorLane::probe(Clock::time_point now) noexcept {
  if (!probe_.fire(now, smoothed_rtt(fd_))) return {};
  proto::encode(proto::DataRequest{DataOp::kProbe, 0, 0, 0}, probe_hdr_);
  iovec whole{probe_hdr_, sizeof(probe_hdr_)};
  iovec *iov = &whole;
  int n = 1;
  for (;;) {
    if (auto ec = tls_ ? tls_->send_nowait(iov, n) : transport::tcp::send_nowait(fd_, iov, n))
      return ec;
    if (n == 0) break;
    // A socket that takes nothing is full of the request, which TCP is
    // still sending: no probe now. A stream that began a frame or record
    // of it must end it before anything else goes. Neither moves progress_:
    // a probe is no answer from the target.
    if (!tls_ && whole.iov_len == sizeof(probe_hdr_)) return {};
    if (auto ec = wait_for(tls_ ? tls_->fd() : fd_, POLLOUT, timeout_ms_,
                           progress_ + std::chrono::milliseconds(timeout_ms_)))
      return ec;
  }
  ++owed_;
  ++probed_;
  RPMEM_LOG_DEBUG("data lane %u: no reply after %.1f ms; probe %u", number_,
                  std::chrono::duration<double, std::milli>(probe_.waited(now)).count(),
                  probe_.sent());
  return {};
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
  const auto start = std::chrono::steady_clock::now();
  if (probes_) probe_.start(start);
  uint8_t raw[proto::kDataReplySize];
  if (auto ec = recv_reply(raw)) return ec;
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

std::error_code TcpInitiatorLane::recv_reply(uint8_t (&raw)[proto::kDataReplySize]) noexcept {
  // The reply usually comes within about the time the last ones took: spin
  // that long first (a round trip over loopback, a durable write when the
  // pool is on a disk), then sleep. When the replies take as long as a
  // device, the first half of that time is a nap (WaitSpin::nap), for one
  // lane per two CPUs at a time (NapSlots). The spin yields the CPU at every
  // turn, and there is none while spins keep missing the reply.
  size_t have = 0;
  {
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
  }
  for (;;) {
    if (have < sizeof(raw))
      if (auto ec = recv_exact(raw + have, sizeof(raw) - have)) return ec;
    // Replies to the probes of earlier waits come first, in their turn.
    if (owed_ == 0) return {};
    const auto answer = proto::decode_data_reply(raw);
    if (!answer || answer->op != DataOp::kProbe || answer->status != 0 || answer->length != 0)
      return {};  // the caller's to judge
    --owed_;
    have = 0;
  }
}

std::error_code TcpInitiatorLane::write(DataOp op, uint64_t offset, uint64_t length,
                                        unsigned flags) noexcept {
  const auto wire_flags = static_cast<uint8_t>(((flags & kWriteRelaxed) ? proto::kDataRelaxed : 0) |
                                               ((flags & kWriteVisible) ? proto::kDataVisible : 0));
  proto::DataRequest req{op, wire_flags, offset, length};
  if (op == DataOp::kFlush) {
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    unacked_.add(offset, length);
    if (queued_ == wq_)
      if (auto ec = with_comeback([&] { return post(nullptr); })) return ec;
    enqueue(req, queued_++);
    return {};
  }
  proto::DataReply reply;
  if (auto ec = with_comeback([&] { return exchange(req, reply); })) return ec;
  return reply.status ? errc(static_cast<int>(reply.status)) : std::error_code{};
}

std::error_code TcpInitiatorLane::drain(unsigned flags) noexcept {
  proto::DataRequest req{DataOp::kDrain,
                         static_cast<uint8_t>((flags & kWriteVisible) ? proto::kDataVisible : 0), 0,
                         0};
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

}  // namespace rpmem::transport::tcp
