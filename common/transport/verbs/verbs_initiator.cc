// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, client side.
#include "common/transport/verbs/verbs_initiator.h"

#include "common/log.h"
#include "common/transport/flush_ranges.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_wire.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

namespace rpmem::transport::verbs {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMaxWrite = 1ull << 30;  // bytes per WRITE work request
constexpr size_t kBounceSize = 256 * 1024;  // rpmem_read chunk
enum WrId : uint64_t { kWrWrite = 1, kWrSend = 2, kWrRecv = 4, kWrRead = 8 };

// What the lanes of one pool share; released with the last lane.
struct Shared {
  PdPtr pd;
  MrPtr pool_mr;
};

class VerbsLane;

// GPSPM or APM: how a range already written by RDMA WRITE becomes durable.
class PersistMethod {
 public:
  virtual ~PersistMethod() = default;
  virtual std::error_code persist_written(VerbsLane &lane, uint64_t offset,
                                          uint64_t length) noexcept = 0;
  virtual std::error_code drain(VerbsLane &lane) noexcept = 0;
  virtual bool tracks_ranges() const noexcept = 0;
};

class VerbsLane final : public InitiatorLane {
 public:
  VerbsLane(std::shared_ptr<Shared> shared, const ProviderInfo &remote, unsigned index,
            const uint8_t *base, unsigned wq_size, int timeout_ms)
      : shared_(std::move(shared)),
        base_(base),
        raddr_(remote.raddr),
        rkey_(remote.rkey),
        max_inline_(std::min<uint32_t>(remote.max_inline, kMaxInline)),
        staged_((remote.flags & kInfoStaged) != 0),
        window_((remote.flags & kInfoBounded) ? remote.window : 0),
        window_raddr_(remote.raddr + uint64_t{index} * window_),
        wq_size_(wq_size),
        timeout_ms_(timeout_ms),
        ranges_(max_inline_ / kRangeSize) {
    landed_.reserve(max_inline_ / kRangeSize);
  }
  ~VerbsLane() override {
    // Queue pair and id before the buffers and CQ they use; the shared
    // protection domain last.
    id_.reset();
    buf_mr_.reset();
    cq_.reset();
    comp_.reset();
    channel_.reset();
    shared_.reset();
  }
  VerbsLane(const VerbsLane &) = delete;
  VerbsLane &operator=(const VerbsLane &) = delete;

  // Connection setup: everything this lane owns.
  EventChannelPtr channel_;
  CompChannelPtr comp_;  // sleeps when spinning did not find the completion
  CqPtr cq_;
  std::unique_ptr<uint8_t[]> buf_;  // send | recv | probe | bounce
  MrPtr buf_mr_;
  CmIdPtr id_;
  std::unique_ptr<PersistMethod> method_;

  static size_t buffer_size(uint32_t max_inline) {
    return kMsgHeaderSize + max_inline + kReplySize + 8 + kBounceSize;
  }
  uint8_t *send_buf() const { return buf_.get(); }
  uint8_t *recv_buf() const { return buf_.get() + kMsgHeaderSize + max_inline_; }
  uint8_t *probe_buf() const { return recv_buf() + kReplySize; }
  uint8_t *bounce_buf() const { return probe_buf() + 8; }
  std::error_code post_reply_buffer() noexcept {
    return post_recv(id_->qp, kWrRecv, recv_buf(), kReplySize, buf_mr_->lkey);
  }

  std::error_code write(DataOp op, uint64_t offset, uint64_t length,
                        bool relaxed) noexcept override {
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    if (window_ > 0) {
      // The bounded path: flushes land in the window and are copied at the
      // drain; a relaxed persist is a flush and a drain.
      if (op == DataOp::kFlush) return land(offset, length);
      if (relaxed && op == DataOp::kPersist) {
        if (auto ec = land(offset, length)) return ec;
        return drain_window();
      }
      // What the window holds comes first: a later inline persist of the
      // same bytes must not be overwritten by an earlier flush's copy.
      if (auto ec = drain_window()) return ec;
    } else {
      // Posted, durable at drain: a relaxed flush, and a flags-0 one when the
      // target copies RDMA writes into the pool with whole-word stores. On a
      // pmem target a NIC's write keeps no such promise: a flags-0 flush goes
      // inline, as a persist (synchronous, as PMDK's).
      if (op == DataOp::kFlush && (relaxed || staged_)) {
        if (auto ec = post_writes(offset, length, raddr_ + offset)) return ec;
        if (method_->tracks_ranges()) ranges_.add(offset, length);
        return {};
      }
      if (relaxed && op == DataOp::kPersist) {
        if (auto ec = post_writes(offset, length, raddr_ + offset)) return ec;
        return method_->persist_written(*this, offset, length);
      }
    }
    // Through the target, copied word by word there.
    const MsgOp mop = op == DataOp::kDeepPersist ? MsgOp::kDeepPersist : MsgOp::kPersist;
    do {
      const uint64_t chunk = std::min<uint64_t>(length, max_inline_);
      std::memcpy(send_buf() + kMsgHeaderSize, base_ + offset, chunk);
      if (auto ec = round_trip({mop, kMsgInline, offset, chunk}, chunk)) return ec;
      offset += chunk;
      length -= chunk;
    } while (length > 0);
    return {};
  }

  std::error_code drain() noexcept override {
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    if (window_ > 0) return drain_window();
    return method_->drain(*this);
  }

  std::error_code read(void *dst, uint64_t offset, uint64_t length) noexcept override {
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    auto *out = static_cast<uint8_t *>(dst);
    // Bounded path: the target copies each chunk into the window first, and
    // what the window holds for the pool goes there before.
    if (window_ > 0)
      if (auto ec = drain_window()) return ec;
    const uint64_t most = window_ > 0 ? std::min<uint64_t>(kBounceSize, window_) : kBounceSize;
    while (length > 0) {
      const auto chunk = static_cast<uint32_t>(std::min<uint64_t>(length, most));
      uint64_t from = raddr_ + offset;
      if (window_ > 0) {
        if (auto ec = round_trip({MsgOp::kRead, 0, offset, chunk}, 0)) return ec;
        from = window_raddr_;
      }
      if (auto ec = post_read(id_->qp, kWrRead, bounce_buf(), chunk, buf_mr_->lkey, from, rkey_))
        return fail("ibv_post_send(RDMA READ)", ec);
      if (auto ec = wait_for(kWrRead)) return ec;
      std::memcpy(out, bounce_buf(), chunk);
      out += chunk;
      offset += chunk;
      length -= chunk;
    }
    return {};
  }

  void shutdown() noexcept override {
    if (!dead_.exchange(true)) disconnect(id_.get());
  }

  // --- for the persist methods ---------------------------------------------
  // SEND header (+ `payload` bytes already in send_buf()), wait for the reply.
  std::error_code round_trip(const MsgHeader &h, uint64_t payload) noexcept {
    encode(h, send_buf());
    if (auto ec = post_send(id_->qp, kWrSend, send_buf(),
                            static_cast<uint32_t>(kMsgHeaderSize + payload), buf_mr_->lkey))
      return fail("ibv_post_send(SEND)", ec);
    if (auto ec = wait_for(kWrSend | kWrRecv)) return ec;
    auto status = decode_reply({recv_buf(), reply_len_});
    if (auto ec = post_reply_buffer()) return fail("ibv_post_recv", ec);
    if (!status) {
      RPMEM_LOG_ERR("verbs lane: malformed reply");
      shutdown();
      return errc(EPROTO);
    }
    return *status ? errc(static_cast<int>(*status)) : std::error_code{};
  }

  // An 8-byte RDMA READ: ordered after every earlier WRITE of this queue
  // pair, so they have reached the target's memory when it completes.
  std::error_code read_probe() noexcept {
    if (auto ec = post_read(id_->qp, kWrRead, probe_buf(), 8, buf_mr_->lkey, raddr_, rkey_))
      return fail("ibv_post_send(RDMA READ)", ec);
    return wait_for(kWrRead);
  }

  std::error_code send_ranges() noexcept {
    if (ranges_.empty()) return {};
    const auto &r = ranges_.ranges();
    for (size_t i = 0; i < r.size(); ++i)
      encode_range(r[i].offset, r[i].length, send_buf() + kMsgHeaderSize + i * kRangeSize);
    const uint64_t n = r.size();
    ranges_.clear();
    return round_trip({MsgOp::kDrain, 0, 0, n}, n * kRangeSize);
  }

 private:
  // RDMA WRITEs of [offset, +length) of the local pool to `remote`.
  std::error_code post_writes(uint64_t offset, uint64_t length, uint64_t remote) noexcept {
    while (length > 0) {
      const auto chunk = static_cast<uint32_t>(std::min(length, kMaxWrite));
      const bool signaled = ++unsignaled_ >= wq_size_ - 1;
      if (auto ec = post_write(id_->qp, kWrWrite, base_ + offset, chunk, shared_->pool_mr->lkey,
                               remote, rkey_, signaled))
        return fail("ibv_post_send(RDMA WRITE)", ec);
      if (signaled)
        if (auto ec = wait_for(kWrWrite)) return ec;
      offset += chunk;
      remote += chunk;
      length -= chunk;
    }
    return {};
  }

  // Bounded path: [offset, +length) into the window, after what it holds;
  // when the window or the range table is full, it is drained first (the
  // target has copied everything out of it when the drain's reply comes),
  // so nothing the target has not copied yet is ever overwritten.
  std::error_code land(uint64_t offset, uint64_t length) noexcept {
    while (length > 0) {
      if (landed_at_ == window_ || landed_.size() == landed_.capacity())
        if (auto ec = drain_window()) return ec;
      const uint64_t chunk = std::min<uint64_t>(length, window_ - landed_at_);
      if (auto ec = post_writes(offset, chunk, window_raddr_ + landed_at_)) return ec;
      // A range that goes on where the last one ended, in the pool as in the
      // window, extends it.
      if (!landed_.empty() && landed_.back().offset + landed_.back().length == offset)
        landed_.back().length += chunk;
      else
        landed_.push_back({offset, chunk});
      landed_at_ += chunk;
      offset += chunk;
      length -= chunk;
    }
    return {};
  }

  // Bounded path: the target copies what the window holds into the pool and
  // makes it durable; one round trip, none when the window is empty.
  std::error_code drain_window() noexcept {
    if (landed_.empty()) return {};
    for (size_t i = 0; i < landed_.size(); ++i)
      encode_range(landed_[i].offset, landed_[i].length,
                   send_buf() + kMsgHeaderSize + i * kRangeSize);
    const uint64_t n = landed_.size();
    landed_.clear();
    landed_at_ = 0;
    return round_trip({MsgOp::kDrain, 0, 0, n}, n * kRangeSize);
  }

  // Waits until the completions in `need` (WrId bits) arrived: spins for
  // about as long as this lane's completions take (a few microseconds on
  // real hardware), unless such spins keep missing (WaitSpin), then sleeps
  // on the completion channel and the rdma_cm channel, up to the timeout. A
  // wake-up from the channel costs far more than an RNIC's round trip
  // (~100 us under emulation), and the caller waits anyway.
  std::error_code wait_for(uint64_t need) noexcept {
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
    const auto spin = spin_.budget();
    uint64_t got = 0;
    bool armed = false;
    bool spinning = spin.count() > 0;
    for (unsigned spins = 0;; ++spins) {
      Completion wc[4];
      const int n = poll(cq_.get(), wc, 4);
      if (n < 0) return fail("ibv_poll_cq", errc(EIO));
      for (int i = 0; i < n; ++i) {
        if (!wc[i].ok) {
          if (!dead_.load()) RPMEM_LOG_ERR("verbs lane: work request failed: %s", wc[i].status);
          return fail(nullptr, errc(ECONNRESET));
        }
        if (wc[i].wr_id == kWrRecv) reply_len_ = wc[i].byte_len;
        got |= wc[i].wr_id;
      }
      if ((got & need) == need) {
        unsignaled_ = 0;  // a signalled completion retires every earlier WRITE
        spin_.took(Clock::now() - start);
        if (spinning) spin_.spun(true);  // found within the spin
        return {};
      }
      if (n > 0) continue;
      if (spinning) {  // the clock only every few polls
        if (spins % 32 != 0 || Clock::now() - start < spin) continue;
        spinning = false;
        spin_.spun(false);
      }
      if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
      if (!armed) {  // arm, then poll once more before sleeping
        if (auto ec = arm(cq_.get())) return fail("ibv_req_notify_cq", ec);
        armed = true;
        continue;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) {
        RPMEM_LOG_ERR("verbs lane: no completion within %d ms", timeout_ms_);
        return fail(nullptr, errc(ECONNRESET));
      }
      pollfd p[2] = {{fd_of(comp_.get()), POLLIN, 0}, {fd_of(channel_.get()), POLLIN, 0}};
      if (::poll(p, 2, static_cast<int>(std::min<long long>(left, 100)) + 1) < 0 && errno != EINTR)
        return fail("poll", last_errc());
      if (p[1].revents) {
        CmEvent ev;
        if (!next_event(channel_.get(), 0, ev)) {
          RPMEM_LOG_ERR("verbs lane: connection event %s", rdma_event_str(ev.type));
          return fail(nullptr, errc(ECONNRESET));
        }
      }
      if (p[0].revents) {
        consume_events(comp_.get());
        armed = false;
      }
    }
  }

  std::error_code fail(const char *call, std::error_code ec) noexcept {
    if (call) RPMEM_LOG_ERR("%s failed: %s", call, ec.message().c_str());
    shutdown();
    return errc(ECONNRESET);
  }

  std::shared_ptr<Shared> shared_;
  const uint8_t *base_;
  uint64_t raddr_;
  uint32_t rkey_;
  uint32_t max_inline_;
  bool staged_;             // the target stages RDMA writes (kInfoStaged)
  uint64_t window_;         // bounded path (kInfoBounded): the lane's window, else 0
  uint64_t window_raddr_;   // where it is on the target
  uint64_t landed_at_ = 0;  // bytes of the window in use
  std::vector<FlushRanges::Range> landed_;  // the pool ranges they are for, in order
  unsigned wq_size_;
  int timeout_ms_;
  unsigned unsignaled_ = 0;
  WaitSpin spin_;  // how long to poll the CQ before sleeping
  uint32_t reply_len_ = 0;
  FlushRanges ranges_;
  std::atomic<bool> dead_{false};
};

class Gpspm final : public PersistMethod {
 public:
  std::error_code persist_written(VerbsLane &lane, uint64_t offset,
                                  uint64_t length) noexcept override {
    // The SEND is ordered after the WRITE on this queue pair.
    return lane.round_trip({MsgOp::kPersist, 0, offset, length}, 0);
  }
  std::error_code drain(VerbsLane &lane) noexcept override { return lane.send_ranges(); }
  bool tracks_ranges() const noexcept override { return true; }
};

class Apm final : public PersistMethod {
 public:
  std::error_code persist_written(VerbsLane &lane, uint64_t, uint64_t) noexcept override {
    return lane.read_probe();
  }
  std::error_code drain(VerbsLane &lane) noexcept override { return lane.read_probe(); }
  bool tracks_ranges() const noexcept override { return false; }
};

bool is_loopback(const sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in *>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const auto *a = &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return true;
    return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
  }
  return false;
}

// Where lane connections go: the target host, or, when that is a loopback
// address (no RDMA route), the address the daemon on this machine listens on.
Result<sockaddr_storage> destination(const InitiatorParams &params, const ProviderInfo &info) {
  sockaddr_storage ss{};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  const std::string port = std::to_string(params.port);
  if (int rc = ::getaddrinfo(params.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return Error{errc(EHOSTUNREACH), "cannot resolve '" + params.host + "': " + ::gai_strerror(rc)};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (!is_loopback(reinterpret_cast<sockaddr *>(&ss)) || info.family == 0) return ss;
  ss = {};
  if (info.family == AF_INET) {
    auto *in = reinterpret_cast<sockaddr_in *>(&ss);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, info.addr.data(), 4);
    in->sin_port = htons(params.port);
  } else {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, info.addr.data(), 16);
    in6->sin6_port = htons(params.port);
  }
  char text[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(info.family, info.addr.data(), text, sizeof(text));
  RPMEM_LOG_INFO("verbs: '%s' is a loopback address; lanes connect to %s", params.host.c_str(),
                 text);
  return ss;
}

}  // namespace

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(const InitiatorParams &params) {
  auto info = decode_provider_info(params.provider_data);
  if (!info) return Error{errc(EPROTO), "invalid verbs provider data from the target"};
  auto dst = destination(params, *info);
  if (!dst) return dst.error();
  const int timeout_ms = static_cast<int>(params.timeout.count());
  const unsigned wq = std::clamp(params.work_queue_size, 2u, 4096u);
  const uint32_t max_inline = std::min<uint32_t>(info->max_inline, kMaxInline);

  std::string why;
  if (auto ec = check_memlock(params.pool_size + params.nlanes * VerbsLane::buffer_size(max_inline),
                              "the local pool and lane buffers", why))
    return Error{ec, why};

  auto shared = std::make_shared<Shared>();
  std::vector<std::unique_ptr<InitiatorLane>> lanes;
  lanes.reserve(params.nlanes);
  for (unsigned i = 0; i < params.nlanes; ++i) {
    const std::string name = "lane " + std::to_string(i);
    auto lane = std::make_unique<VerbsLane>(shared, *info, i, params.local_base, wq, timeout_ms);
    auto channel = create_event_channel();
    if (!channel) return channel.error();
    lane->channel_ = std::move(channel.value());
    auto id = create_id(lane->channel_.get());
    if (!id) return id.error();
    lane->id_ = std::move(id.value());
    if (auto ec = resolve(lane->id_.get(), reinterpret_cast<sockaddr *>(&dst.value()), timeout_ms))
      return Error{ec.value() == EHOSTUNREACH ? ec : errc(ECONNRESET),
                   "cannot reach " + params.host + " over RDMA for " + name + ": " + ec.message()};
    ibv_context *ctx = lane->id_->verbs;
    if (!shared->pd) {
      auto pd = alloc_pd(ctx);
      if (!pd) return pd.error();
      shared->pd = std::move(pd.value());
      auto mr = register_memory(shared->pd.get(), params.local_base, params.pool_size, 0,
                                "the local pool");
      if (!mr) return mr.error();
      shared->pool_mr = std::move(mr.value());
    } else if (shared->pd->context != ctx) {
      return Error{errc(ECONNRESET), name + " resolved to another RDMA device"};
    }
    auto comp = create_comp_channel(ctx);
    if (!comp) return comp.error();
    lane->comp_ = std::move(comp.value());
    auto cq = create_cq(ctx, static_cast<int>(wq + 8), lane->comp_.get());
    if (!cq) return cq.error();
    lane->cq_ = std::move(cq.value());
    if (auto ec = create_qp(lane->id_.get(), shared->pd.get(), lane->cq_.get(), wq + 2, 1))
      return Error{ec, "cannot create the queue pair of " + name};
    const size_t bsize = VerbsLane::buffer_size(max_inline);
    lane->buf_ = std::make_unique<uint8_t[]>(bsize);
    auto bmr = register_memory(shared->pd.get(), lane->buf_.get(), bsize, IBV_ACCESS_LOCAL_WRITE,
                               "lane buffers");
    if (!bmr) return bmr.error();
    lane->buf_mr_ = std::move(bmr.value());
    if (auto ec = lane->post_reply_buffer()) return Error{ec, "ibv_post_recv failed for " + name};
    if (info->method == proto::PersistMethod::kApm)
      lane->method_ = std::make_unique<Apm>();
    else
      lane->method_ = std::make_unique<Gpspm>();

    ConnectData cd{params.secret, i, params.nlanes};
    uint8_t pdata[kConnectDataSize];
    encode(cd, pdata);
    std::error_code ec = connect(lane->id_.get(), pdata, sizeof(pdata));
    if (!ec)
      ec = expect_event(lane->channel_.get(), RDMA_CM_EVENT_ESTABLISHED, timeout_ms, "connect");
    if (ec) return Error{errc(ECONNRESET), name + " refused by the target: " + ec.message()};
    lanes.push_back(std::move(lane));
  }
  RPMEM_LOG_INFO("verbs: %u lanes connected, %s, work queue %u%s", params.nlanes,
                 info->method == proto::PersistMethod::kApm ? "APM" : "GPSPM", wq,
                 (info->flags & kInfoBounded) ? ", writes through landing windows" : "");
  return lanes;
}

}  // namespace rpmem::transport::verbs
