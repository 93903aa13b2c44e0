// SPDX-License-Identifier: BSD-3-Clause
// VerbsLane: one client lane of the verbs provider, an RC queue pair with
// its completion queue, channels and registered buffers. verbs_initiator.cc
// sets it up and connects it (the control path); its requests are in
// verbs_initiator_datapath.cc (the data path). Internal to the provider.
// Thread-safety: one thread at a time, except shutdown() (any thread).
// Errors: ECONNRESET once the lane is dead (a QP error, a disconnect, the
// timeout); EPROTO for a malformed reply; the target's errno otherwise.
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_LANE_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_LANE_H

#include "common/transport/flush_ranges.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/transport.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_wire.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace rpmem::transport::verbs {

// GPSPM or APM: how a range already written by RDMA WRITE becomes durable
// (verbs_initiator_datapath.cc).
class PersistMethod;

class VerbsLane final : public InitiatorLane {
 public:
  static constexpr size_t kBounceSize = 256 * 1024;  // rpmem_read chunk
  enum WrId : uint64_t { kWrWrite = 1, kWrSend = 2, kWrRecv = 4, kWrRead = 8 };

  // What the lanes of one pool share; released with the last lane.
  struct Shared {
    PdPtr pd;
    MrPtr pool_mr;
  };

  VerbsLane(std::shared_ptr<Shared> shared, const ProviderInfo &remote, unsigned index,
            const uint8_t *base, unsigned wq_size, int timeout_ms);
  ~VerbsLane() override;
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
  // Sets method_ to the target's persist method.
  void use_method(proto::PersistMethod method);

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
                        unsigned flags) noexcept override;
  std::error_code drain(unsigned flags) noexcept override;
  using InitiatorLane::drain;
  std::error_code read(void *dst, uint64_t offset, uint64_t length) noexcept override;
  void shutdown() noexcept override;

  // --- for the persist methods ---------------------------------------------
  // SEND header (+ `payload` bytes already in send_buf()), wait for the reply.
  std::error_code round_trip(const MsgHeader &request, uint64_t payload) noexcept;
  // An 8-byte RDMA READ: ordered after every earlier WRITE of this queue
  // pair, so they have reached the target's memory when it completes.
  std::error_code read_probe() noexcept;
  // GPSPM's drain: one round trip carrying the flushed ranges.
  std::error_code send_ranges() noexcept;

 private:
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
  // Logs the failed `call` (when not null), shuts the lane down: ECONNRESET.
  std::error_code fail(const char *call, std::error_code ec) noexcept;

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
  bool visible_ = false;  // the call under way asked for the visible level (kWriteVisible)
};

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_LANE_H
