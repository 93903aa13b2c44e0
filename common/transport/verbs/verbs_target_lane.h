// SPDX-License-Identifier: BSD-3-Clause
// Inside the verbs target (verbs_target.cc, verbs_target_data.cc): one
// lane's queue pair, completion queue and buffers.
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_LANE_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_LANE_H

#include "common/transport/verbs/verbs_target.h"
#include "common/transport/verbs/verbs_wire.h"

#include <unistd.h>

#include <atomic>
#include <memory>

namespace rpmem::transport::verbs {

enum WrId : uint64_t { kWrRecv = 1, kWrReply = 2 };
inline constexpr size_t kRecvSize = kMsgHeaderSize + kMaxInline;

struct VerbsTarget::Lane {
  unsigned index = 0;
  EventChannelPtr channel;
  CompChannelPtr comp;
  CqPtr cq;
  std::unique_ptr<uint8_t[]> buf;  // receive buffer | reply buffer
  MrPtr mr;
  CmIdPtr id;
  bool reply_busy = false;
  // Set, and `kick` (an eventfd) made readable, when a new connection of
  // the lane takes its place: its thread ends.
  std::atomic<bool> replaced{false};
  int kick = -1;

  uint8_t *reply_buf() const { return buf.get() + kRecvSize; }
  ~Lane() {
    id.reset();  // the queue pair before its CQ and buffers
    mr.reset();
    cq.reset();
    comp.reset();
    if (kick >= 0) ::close(kick);
  }
};

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_LANE_H
