// SPDX-License-Identifier: BSD-3-Clause
// VerbsLane: one client lane of the verbs provider, an RC queue pair with
// its completion queue, channels and registered buffers. verbs_initiator.cc
// sets it up and connects it (the control path); its requests are in
// verbs_initiator_datapath.cc (the data path). Internal to the provider.
// Thread-safety: one thread at a time, except shutdown() (any thread).
// Errors: ECONNRESET once the lane is dead (a QP error or a disconnect that
// it could not come back from, the timeout); EPROTO for a malformed reply;
// the target's errno otherwise.
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_LANE_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_LANE_H

#include "common/transport/flush_ranges.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/transport.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_wire.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace rpmem::transport::verbs {

// GPSPM or APM: how a range already written by RDMA WRITE becomes durable
// (verbs_initiator_datapath.cc).
class PersistMethod;

// A lane that can come back (to a target of protocol minor >=
// kMinorVerbsResume) rides out a failed queue pair (a work request that
// fails, the retry counter exceeded during an outage; an rdma_cm
// disconnect): it connects again within its session at the next epoch, on
// a new rdma_cm id, completion queue and queue pair, each try bounded by
// kDialTry, writes again what it wrote and the target has not yet made
// durable (the flushes since the last drain, or what its landing window
// holds) and makes the call again from its start, every byte from the
// local pool: a persist of a range is idempotent. The whole stall, its
// tries included, is bounded by InitiatorParams::timeout from the last
// completion.
inline constexpr std::chrono::milliseconds kDialTry{1000};
// Such a lane's queue pairs (both ends: the target's takes the client's
// retry count) wait 4.096 us << kAckTimeout (0.27 s) for an
// acknowledgement before they send again, kRetryCount times: after about
// 2 s without one they fail and the lane comes back on a new one, which is
// then what notices the link's return (within kDialTry). With rdma_cm's
// defaults (retry count 7, which soft-RoCE takes as "forever") a queue pair
// would wait out any outage, and the lane could not tell one from a target
// that is gone until the bound.
inline constexpr uint8_t kAckTimeout = 16;
inline constexpr uint8_t kRetryCount = 6;

class VerbsLane final : public InitiatorLane {
 public:
  static constexpr size_t kBounceSize = 256 * 1024;  // rpmem_read chunk
  enum WrId : uint64_t { kWrWrite = 1, kWrSend = 2, kWrRecv = 4, kWrRead = 8 };

  // What the lanes of one pool share; released with the last lane.
  struct Shared {
    PdPtr pd;
    MrPtr pool_mr;
    // Where and as what the lanes connect (again).
    sockaddr_storage dst{};
    std::string host;
    proto::Secret secret{};
    unsigned nlanes = 0;
    size_t pool_size = 0;
    bool comeback = false;  // the target takes lanes that come back
    bool proofs = false;    // ... and claims that prove the secret with a MAC
    // Service mode: where the session is now (it moves when the client
    // reopens the pool on a restarted service: port, secret, provider
    // data); null: always dst, secret and the first provider data.
    std::shared_ptr<LaneRoute> route;
    proto::Bytes provider_data;  // the first session's
  };

  VerbsLane(std::shared_ptr<Shared> shared, const ProviderInfo &remote, unsigned index,
            const uint8_t *base, unsigned wq_size, int timeout_ms);
  ~VerbsLane() override;
  VerbsLane(const VerbsLane &) = delete;
  VerbsLane &operator=(const VerbsLane &) = delete;

  // Connects the lane at `epoch` within `timeout_ms` (verbs_initiator.cc):
  // a new connection (rdma_cm id, completion channel and queue, queue pair),
  // a reply buffer posted on it, the connect request proving the session's
  // secret; then it is the lane's. The protection domain and the pool's
  // registration are made by the first lane's first dial.
  std::optional<Error> dial(uint16_t epoch, int timeout_ms) noexcept;
  // Sets method_ to the target's persist method.
  void use_method(proto::PersistMethod method);

  static size_t buffer_size(uint32_t max_inline) {
    return kMsgHeaderSize + max_inline + kReplySize + 8 + kBounceSize;
  }
  uint8_t *send_buf() const { return buf_.get(); }
  uint8_t *recv_buf() const { return buf_.get() + kMsgHeaderSize + max_inline_; }
  uint8_t *probe_buf() const { return recv_buf() + kReplySize; }
  uint8_t *bounce_buf() const { return probe_buf() + 8; }
  // The receive for the next reply, on `qp` (the lane's, or a new one's).
  std::error_code post_reply_buffer(ibv_qp *qp) noexcept {
    return post_recv(qp, kWrRecv, recv_buf(), kReplySize, buf_mr_->lkey);
  }

  std::error_code write(DataOp op, uint64_t offset, uint64_t length,
                        unsigned flags) noexcept override;
  std::error_code drain(unsigned flags) noexcept override;
  using InitiatorLane::drain;
  std::error_code read(void *dst, uint64_t offset, uint64_t length) noexcept override;
  void shutdown() noexcept override;
  std::string failure() const override { return why_; }
  // The flushes since the last drain, and what the landing window holds.
  std::vector<PoolRange> unacknowledged() const override {
    std::vector<PoolRange> out = ranges_.ranges();
    out.insert(out.end(), landed_.begin(), landed_.end());
    return out;
  }

  // --- for the persist methods ---------------------------------------------
  // SEND header (+ `payload` bytes already in send_buf()), wait for the reply.
  std::error_code round_trip(const MsgHeader &request, uint64_t payload) noexcept;
  // An 8-byte RDMA READ: ordered after every earlier WRITE of this queue
  // pair, so they have reached the target's memory when it completes.
  std::error_code read_probe() noexcept;
  // GPSPM's drain: one round trip carrying the flushed ranges.
  std::error_code send_ranges() noexcept;

 private:
  using Clock = std::chrono::steady_clock;
  // One connection's handles; members go in reverse: the queue pair (in
  // id) before the queue and channels it uses. Assigned only into an empty
  // one (member by member, the channel would go first).
  struct Connection {
    EventChannelPtr channel;
    CompChannelPtr comp;  // sleeps when spinning did not find the completion
    CqPtr cq;
    CmIdPtr id;
  };
  // `c` becomes the lane's connection (conn_); the old one is destroyed.
  void install(Connection &c) noexcept;
  // Why the provider data of a restarted service's session cannot take
  // the place of the one in use (another landing path or window, fewer
  // inline bytes), or nullptr; and taking it (its registration, method).
  const char *incompatible(const ProviderInfo &info) const noexcept;
  void adopt(const ProviderInfo &info, proto::Bytes data);

  // The calls, once (with_comeback makes them again after a comeback).
  std::error_code write_once(DataOp op, uint64_t offset, uint64_t length, unsigned flags) noexcept;
  std::error_code drain_once() noexcept;
  std::error_code read_once(void *dst, uint64_t offset, uint64_t length) noexcept;
  // Makes `attempt` (one of the calls above) and, while it fails because
  // the queue pair failed on a lane that can come back, comes back and
  // makes it again.
  template <class Attempt>
  std::error_code with_comeback(Attempt &&attempt) noexcept;
  // Connects again at the next epochs until one comes through and what was
  // not made durable is written again, within the timeout from progress_:
  // 0, or ECONNRESET with why_ set (the lane is then dead).
  std::error_code come_back() noexcept;
  // On a new connection: the RDMA WRITEs the target may have lost with the
  // old one (the tracked flushes, or what the landing window held).
  std::error_code replay() noexcept;

  // RDMA WRITEs of [offset, +length) of the local pool to `remote`.
  std::error_code post_writes(uint64_t offset, uint64_t length, uint64_t remote) noexcept;
  // Bounded path: [offset, +length) into the window, after what it holds;
  // when the window or the range table is full, it is drained first (the
  // target has copied everything out of it when the drain's reply comes),
  // so nothing the target has not copied yet is ever overwritten.
  std::error_code land(uint64_t offset, uint64_t length) noexcept;
  // Bounded path: the target copies what the window holds into the pool and
  // makes it durable; one round trip, none when the window is empty.
  std::error_code drain_window() noexcept;
  // Waits until the completions in `need` (WrId bits) arrived, within the
  // timeout (verbs_initiator_datapath.cc says how).
  std::error_code wait_for(uint64_t need) noexcept;
  // The queue pair failed (`call` failed, when not null, or the cause is
  // in `what`): logged, the lane is broken (ECONNRESET); with_comeback
  // connects it again or it is dead.
  std::error_code fail(const char *call, std::error_code ec, std::string what = {}) noexcept;
  // The lane is given up on: why_ = `why`, logged, dead (ECONNRESET).
  std::error_code give_up(std::string why) noexcept;

  std::shared_ptr<Shared> shared_;
  // The connection (the owning thread replaces it; shutdown() reads its id
  // under id_mu_).
  Connection conn_;
  std::mutex id_mu_;
  std::unique_ptr<uint8_t[]> buf_;  // send | recv | probe | bounce
  MrPtr buf_mr_;
  std::unique_ptr<PersistMethod> method_;
  proto::Bytes provider_data_;  // of the session the lane is connected to
  const unsigned index_;
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
  // The flushes since the last drain (FlushRanges: every transport's one
  // record of them): what GPSPM's drain names, what a new connection
  // writes again, and with landed_ what unacknowledged() answers.
  FlushRanges ranges_;
  std::atomic<bool> dead_{false};
  bool broken_ = false;           // the queue pair failed in the call under way
  std::string cause_;             // how (for the log, and the last try's text)
  std::string why_;               // why the lane is dead, for rpmem_errormsg()
  uint16_t epoch_ = 0;            // of the connection in use
  Clock::time_point progress_{};  // the last completion, or the call's start
  bool visible_ = false;          // the call under way asked for the visible level (kWriteVisible)
};

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_LANE_H
