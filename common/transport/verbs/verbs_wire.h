// SPDX-License-Identifier: BSD-3-Clause
// The verbs provider's own bytes: what rpmemd returns in
// PoolResponse.provider_data, the private data of a lane's connect request,
// and the messages a lane SENDs. Little-endian, explicit encode/decode,
// no rdma-core types: the codec is unit-tested without a device.
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_WIRE_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_WIRE_H

#include "common/proto.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rpmem::transport::verbs {

inline constexpr uint32_t kWireVersion = 1;

// Bytes of payload one SEND may carry (inline persists, drain ranges); the
// target posts one receive buffer of kMsgHeaderSize + this per lane.
inline constexpr uint32_t kMaxInline = 32 * 1024;

// rpmemd -> client, in PoolResponse.provider_data (kProviderInfoSize bytes).
struct ProviderInfo {
  proto::PersistMethod method = proto::PersistMethod::kGpspm;
  uint64_t raddr = 0;  // target virtual address of pool offset 0
  uint32_t rkey = 0;   // remote read and write, [raddr, raddr + pool size)
  uint32_t max_inline = kMaxInline;
  // The address rdma_cm listens on (family 0: any). A client whose target
  // host is a loopback address, which has no RDMA route, connects here: the
  // daemon runs on the same machine.
  uint16_t family = 0;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> addr{};
  uint8_t flags = 0;  // kInfoStaged, kInfoBounded; only for clients that know them
  // kInfoBounded: bytes of each lane's landing window; lane i's window is
  // [raddr + i * window, +window) of the region rkey names.
  uint32_t window = 0;
};
// Flags-0 flushes may go by RDMA WRITE: the daemon copies what the NIC
// wrote into the pool with whole-word stores when it is persisted or
// drained, so they keep their 8-byte failure atomicity (clients of minor
// >= kMinorStaged).
inline constexpr uint8_t kInfoStaged = 1;
// The pool is not registered (a file in the page cache, fsdax pmem): RDMA
// WRITEs land in the lane's window, in order, and a drain names the pool
// ranges they are for; the daemon copies them into the pool and makes them
// durable before it answers. rpmem_read goes through the window too
// (MsgOp::kRead). With kInfoStaged. Clients of minor >= kMinorBounded.
inline constexpr uint8_t kInfoBounded = 2;
inline constexpr size_t kProviderInfoSize = 48;
proto::Bytes encode(const ProviderInfo &info);
std::optional<ProviderInfo> decode_provider_info(std::span<const uint8_t> b);

// Private data of a lane's connect request: proves the session secret
// (from protocol minor 9 with a MAC, never showing it).
// u32 magic, then the claim a tcp lane's hello carries (proto::LaneClaim):
// its u32 lane is u16 lane, u16 epoch, as on tcp lanes. An epoch above 0
// (only towards a daemon of protocol minor >= kMinorVerbsResume): the lane
// connects again within its session, its queue pair lost or stalled.
struct ConnectData {
  proto::Secret proof{};  // of the session secret (transport/lane_proof.h)
  uint32_t lane = 0;      // u16 on the wire
  uint16_t epoch = 0;     // 0 first, then one more each time it comes back
  uint32_t nlanes = 0;
};
inline constexpr size_t kConnectDataSize = 4 + proto::kLaneClaimSize;  // under RC's 56-byte limit
void encode(const ConnectData &c, uint8_t (&out)[kConnectDataSize]);
// Extra trailing bytes (the CM pads private data) are ignored.
std::optional<ConnectData> decode_connect_data(std::span<const uint8_t> b);

// A lane request, SENT by the client: header + payload.
enum class MsgOp : uint8_t {
  kPersist = 1,      // make [offset, +length) durable (data inline or already written)
  kDeepPersist = 2,  // the same, down to the lowest persistence domain
  kDrain = 3,        // payload: `length` ranges of 16 bytes (offset, length)
  // kInfoBounded: copy [offset, +length) of the pool to the start of the
  // lane's window (length <= window), to be read from there by RDMA READ.
  kRead = 4,
};
// The lane operations' codes on verbs lanes; a flush has none (it is an
// RDMA WRITE, made durable by a later persist or drain).
constexpr wire::LaneOp lane_op(MsgOp op) noexcept {
  switch (op) {
    case MsgOp::kPersist:
      return wire::LaneOp::kPersist;
    case MsgOp::kDeepPersist:
      return wire::LaneOp::kDeepPersist;
    case MsgOp::kDrain:
      return wire::LaneOp::kDrain;
    case MsgOp::kRead:
      break;
  }
  return wire::LaneOp::kRead;
}
constexpr std::optional<MsgOp> msg_op(wire::LaneOp op) noexcept {
  switch (op) {
    case wire::LaneOp::kPersist:
      return MsgOp::kPersist;
    case wire::LaneOp::kDeepPersist:
      return MsgOp::kDeepPersist;
    case wire::LaneOp::kDrain:
      return MsgOp::kDrain;
    case wire::LaneOp::kRead:
      return MsgOp::kRead;
    case wire::LaneOp::kFlush:
      break;
  }
  return std::nullopt;
}
inline constexpr uint8_t kMsgInline = 1;  // payload holds the `length` bytes to copy
// A persist or drain may be answered once the bytes are visible (protocol
// minor 7, on a session granted visible: proto::kDataVisible).
inline constexpr uint8_t kMsgVisible = 2;
struct MsgHeader {
  MsgOp op = MsgOp::kPersist;
  uint8_t flags = 0;
  uint64_t offset = 0;
  uint64_t length = 0;  // bytes (kPersist, kDeepPersist) or ranges (kDrain)
};
inline constexpr size_t kMsgHeaderSize = proto::kRequestHeaderSize;  // proto::RequestHeader
inline constexpr size_t kRangeSize = 16;
void encode(const MsgHeader &m, uint8_t *out);  // kMsgHeaderSize bytes
// nullopt: unknown op or flags, non-zero reserved bytes, or a payload size
// (`total` bytes received) that does not match the header.
std::optional<MsgHeader> decode_msg(std::span<const uint8_t> received);
void encode_range(uint64_t offset, uint64_t length, uint8_t *out);
void decode_range(const uint8_t *in, uint64_t &offset, uint64_t &length);

// The target's answer: a status (0 or a positive errno, wire::is_errno) for
// the request.
inline constexpr size_t kReplySize = 8;
void encode_reply(uint32_t status, uint8_t *out);
std::optional<uint32_t> decode_reply(std::span<const uint8_t> received);

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_WIRE_H
