// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, client side, the data path: a VerbsLane's requests (RDMA
// WRITEs, inline SENDs, READs), the persist methods GPSPM and APM, and the
// wait for completions; the lanes' setup is in verbs_initiator.cc.
#include "common/log.h"
#include "common/text.h"
#include "common/transport/verbs/verbs_lane.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

namespace rpmem::transport::verbs {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMaxWrite = 1ull << 30;  // bytes per WRITE work request

}  // namespace

class PersistMethod {
 public:
  virtual ~PersistMethod() = default;
  virtual std::error_code persist_written(VerbsLane &lane, uint64_t offset,
                                          uint64_t length) noexcept = 0;
  virtual std::error_code drain(VerbsLane &lane) noexcept = 0;
};

namespace {

class Gpspm final : public PersistMethod {
 public:
  std::error_code persist_written(VerbsLane &lane, uint64_t offset,
                                  uint64_t length) noexcept override {
    // The SEND is ordered after the WRITE on this queue pair.
    return lane.round_trip({MsgOp::kPersist, 0, offset, length}, 0);
  }
  std::error_code drain(VerbsLane &lane) noexcept override { return lane.send_ranges(); }
};

class Apm final : public PersistMethod {
 public:
  std::error_code persist_written(VerbsLane &lane, uint64_t, uint64_t) noexcept override {
    return lane.read_probe();
  }
  std::error_code drain(VerbsLane &lane) noexcept override { return lane.read_probe(); }
};

}  // namespace

VerbsLane::VerbsLane(std::shared_ptr<Shared> shared, const ProviderInfo &remote, unsigned index,
                     const uint8_t *base, unsigned wq_size, int timeout_ms)
    : shared_(std::move(shared)),
      provider_data_(shared_->provider_data),
      index_(index),
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

VerbsLane::~VerbsLane() {
  // The connection (its queue pair first) before the buffers it uses; the
  // shared protection domain last.
  { Connection gone = std::exchange(conn_, {}); }
  buf_mr_.reset();
  shared_.reset();
}

void VerbsLane::install(Connection &c) noexcept {
  Connection old;
  {
    std::lock_guard lock(id_mu_);
    old = std::exchange(conn_, std::move(c));
  }
  unsignaled_ = 0;
  reply_len_ = 0;
}  // `old` goes: its queue pair first

void VerbsLane::use_method(proto::PersistMethod method) {
  if (method == proto::PersistMethod::kApm)
    method_ = std::make_unique<Apm>();
  else
    method_ = std::make_unique<Gpspm>();
}

std::error_code VerbsLane::write(DataOp op, uint64_t offset, uint64_t length,
                                 unsigned flags) noexcept {
  return with_comeback([&] { return write_once(op, offset, length, flags); });
}

std::error_code VerbsLane::drain(unsigned flags) noexcept {
  visible_ = (flags & kWriteVisible) != 0;
  return with_comeback([&] { return drain_once(); });
}

std::error_code VerbsLane::read(void *dst, uint64_t offset, uint64_t length) noexcept {
  return with_comeback([&] { return read_once(dst, offset, length); });
}

std::error_code VerbsLane::write_once(DataOp op, uint64_t offset, uint64_t length,
                                      unsigned flags) noexcept {
  const bool relaxed = (flags & kWriteRelaxed) != 0;
  visible_ = (flags & kWriteVisible) != 0;
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
      ranges_.add(offset, length);
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

std::error_code VerbsLane::drain_once() noexcept {
  if (window_ > 0) return drain_window();
  auto ec = method_->drain(*this);
  // Answered (whatever its status) or dead: those flushes are done with;
  // a failed queue pair keeps them for the new connection.
  if (!broken_) ranges_.clear();
  return ec;
}

std::error_code VerbsLane::read_once(void *dst, uint64_t offset, uint64_t length) noexcept {
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
    if (auto ec = post_read(conn_.id->qp, kWrRead, bounce_buf(), chunk, buf_mr_->lkey, from, rkey_))
      return fail("ibv_post_send(RDMA READ)", ec);
    if (auto ec = wait_for(kWrRead)) return ec;
    std::memcpy(out, bounce_buf(), chunk);
    out += chunk;
    offset += chunk;
    length -= chunk;
  }
  return {};
}

void VerbsLane::shutdown() noexcept {
  if (dead_.exchange(true)) return;
  std::lock_guard lock(id_mu_);
  if (conn_.id) disconnect(conn_.id.get());
}

template <class Attempt>
std::error_code VerbsLane::with_comeback(Attempt &&attempt) noexcept {
  if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
  progress_ = Clock::now();
  for (;;) {
    broken_ = false;
    std::error_code ec = attempt();
    if (!ec || !broken_) return ec;
    if (!shared_->comeback || dead_.load(std::memory_order_relaxed)) {
      if (why_.empty()) why_ = cause_;
      shutdown();
      return errc(ECONNRESET);
    }
    if (auto lost = come_back()) return lost;
  }
}

std::error_code VerbsLane::round_trip(const MsgHeader &request, uint64_t payload) noexcept {
  MsgHeader h = request;
  // The level of the call under way, for the requests the target makes
  // durable (a deep persist is always persistent).
  if (visible_ && (h.op == MsgOp::kPersist || h.op == MsgOp::kDrain)) h.flags |= kMsgVisible;
  encode(h, send_buf());
  if (auto ec = post_send(conn_.id->qp, kWrSend, send_buf(),
                          static_cast<uint32_t>(kMsgHeaderSize + payload), buf_mr_->lkey))
    return fail("ibv_post_send(SEND)", ec);
  if (auto ec = wait_for(kWrSend | kWrRecv)) return ec;
  auto status = decode_reply({recv_buf(), reply_len_});
  if (auto ec = post_reply_buffer(conn_.id->qp)) return fail("ibv_post_recv", ec);
  if (!status) {
    why_ = "malformed reply from the target";
    RPMEM_LOG_ERR("verbs lane %u: %s", index_, why_.c_str());
    shutdown();
    return errc(EPROTO);
  }
  return *status ? errc(static_cast<int>(*status)) : std::error_code{};
}

std::error_code VerbsLane::read_probe() noexcept {
  if (auto ec = post_read(conn_.id->qp, kWrRead, probe_buf(), 8, buf_mr_->lkey, raddr_, rkey_))
    return fail("ibv_post_send(RDMA READ)", ec);
  return wait_for(kWrRead);
}

std::error_code VerbsLane::send_ranges() noexcept {
  if (ranges_.empty()) return {};
  const auto &r = ranges_.ranges();
  for (size_t i = 0; i < r.size(); ++i)
    encode_range(r[i].offset, r[i].length, send_buf() + kMsgHeaderSize + i * kRangeSize);
  const uint64_t n = r.size();
  return round_trip({MsgOp::kDrain, 0, 0, n}, n * kRangeSize);
}

std::error_code VerbsLane::post_writes(uint64_t offset, uint64_t length, uint64_t remote) noexcept {
  while (length > 0) {
    const auto chunk = static_cast<uint32_t>(std::min(length, kMaxWrite));
    const bool signaled = ++unsignaled_ >= wq_size_ - 1;
    if (auto ec = post_write(conn_.id->qp, kWrWrite, base_ + offset, chunk, shared_->pool_mr->lkey,
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

std::error_code VerbsLane::land(uint64_t offset, uint64_t length) noexcept {
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

std::error_code VerbsLane::drain_window() noexcept {
  if (landed_.empty()) return {};
  for (size_t i = 0; i < landed_.size(); ++i)
    encode_range(landed_[i].offset, landed_[i].length,
                 send_buf() + kMsgHeaderSize + i * kRangeSize);
  const uint64_t n = landed_.size();
  auto ec = round_trip({MsgOp::kDrain, 0, 0, n}, n * kRangeSize);
  // Answered (whatever its status) or dead: the window is free again; a
  // failed queue pair keeps what it holds for the new connection.
  if (!broken_) {
    landed_.clear();
    landed_at_ = 0;
  }
  return ec;
}

// Waits until the completions in `need` (WrId bits) arrived: spins for
// about as long as this lane's completions take (a few microseconds on
// real hardware), unless such spins keep missing (WaitSpin), then sleeps
// on the completion channel and the rdma_cm channel, up to the timeout. A
// wake-up from the channel costs far more than an RNIC's round trip
// (~100 us under emulation), and the caller waits anyway.
std::error_code VerbsLane::wait_for(uint64_t need) noexcept {
  const auto start = Clock::now();
  // The bound is on the stall: from the last completion (or the call's
  // start), whatever waits and tries to come back came in between.
  const auto deadline = progress_ + std::chrono::milliseconds(timeout_ms_);
  const auto spin = spin_.budget();
  uint64_t got = 0;
  bool armed = false;
  bool spinning = spin.count() > 0;
  for (unsigned spins = 0;; ++spins) {
    Completion wc[4];
    const int n = poll(conn_.cq.get(), wc, 4);
    if (n < 0) return fail("ibv_poll_cq", errc(EIO));
    for (int i = 0; i < n; ++i) {
      if (!wc[i].ok) return fail(nullptr, {}, std::string("work request failed: ") + wc[i].status);
      if (wc[i].wr_id == kWrRecv) reply_len_ = wc[i].byte_len;
      got |= wc[i].wr_id;
    }
    if ((got & need) == need) {
      unsignaled_ = 0;  // a signalled completion retires every earlier WRITE
      progress_ = Clock::now();
      spin_.took(progress_ - start);
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
      if (auto ec = arm(conn_.cq.get())) return fail("ibv_req_notify_cq", ec);
      armed = true;
      continue;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) return give_up(no_answer_text(std::chrono::milliseconds(timeout_ms_)));
    pollfd p[2] = {{fd_of(conn_.comp.get()), POLLIN, 0}, {fd_of(conn_.channel.get()), POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(std::min<long long>(left, 100)) + 1) < 0 && errno != EINTR)
      return fail("poll", last_errc());
    if (p[1].revents) {
      CmEvent ev;
      if (!next_event(conn_.channel.get(), 0, ev))
        return fail(nullptr, {}, std::string("connection event ") + rdma_event_str(ev.type));
    }
    if (p[0].revents) {
      consume_events(conn_.comp.get());
      armed = false;
    }
  }
}

std::error_code VerbsLane::fail(const char *call, std::error_code ec, std::string what) noexcept {
  cause_ = call ? std::string(call) + " failed: " + ec.message() : std::move(what);
  if (!shared_->comeback && !dead_.load(std::memory_order_relaxed))
    RPMEM_LOG_ERR("verbs lane %u: %s", index_, cause_.c_str());
  broken_ = true;
  return errc(ECONNRESET);
}

std::error_code VerbsLane::give_up(std::string why) noexcept {
  why_ = std::move(why);
  if (!dead_.load(std::memory_order_relaxed))
    RPMEM_LOG_ERR("verbs lane %u: %s", index_, why_.c_str());
  shutdown();
  return errc(ECONNRESET);
}

}  // namespace rpmem::transport::verbs
