// SPDX-License-Identifier: BSD-3-Clause
// The data lanes' messages at their fixed offsets: the lane hello (and the
// claim inside it that verbs lanes send too), the tcp lanes' requests and
// replies. The control channel's messages are proto.cc's.
#include "common/proto.h"

#include <cstring>

namespace rpmem::proto {
namespace {

using wire::LaneOp;
using wire::load_le;
using wire::store_le;

// lane_op() and data_op() undo each other, for every operation.
constexpr bool ops_round_trip() {
  for (LaneOp op :
       {LaneOp::kPersist, LaneOp::kDeepPersist, LaneOp::kFlush, LaneOp::kDrain, LaneOp::kRead})
    if (lane_op(data_op(op)) != op) return false;
  return true;
}
static_assert(ops_round_trip());

}  // namespace

void encode(const LaneClaim &c, uint8_t *out) {
  std::memcpy(out, c.proof.data(), kSecretSize);
  store_le(out + kSecretSize, c.lane, 4);
  store_le(out + kSecretSize + 4, c.nlanes, 4);
}

LaneClaim decode_lane_claim(const uint8_t *in) {
  LaneClaim c;
  std::memcpy(c.proof.data(), in, kSecretSize);
  c.lane = static_cast<uint32_t>(load_le(in + kSecretSize, 4));
  c.nlanes = static_cast<uint32_t>(load_le(in + kSecretSize + 4, 4));
  return c;
}

void encode(const LaneHello &m, uint8_t (&out)[kLaneHelloSize]) {
  store_le(out, kLaneMagic, 4);
  store_le(out + 4, m.major, 2);
  store_le(out + 6, m.minor, 2);
  encode(LaneClaim{m.proof, (m.lane & kMaxLaneNumber) | uint32_t{m.epoch} << 16, m.nlanes},
         out + 8);
}

std::optional<LaneHello> decode_lane_hello(std::span<const uint8_t> b) {
  if (b.size() != kLaneHelloSize || load_le(b.data(), 4) != kLaneMagic) return std::nullopt;
  LaneHello m;
  m.major = static_cast<uint16_t>(load_le(b.data() + 4, 2));
  m.minor = static_cast<uint16_t>(load_le(b.data() + 6, 2));
  const LaneClaim c = decode_lane_claim(b.data() + 8);
  m.proof = c.proof;
  m.lane = c.lane & kMaxLaneNumber;
  m.epoch = static_cast<uint16_t>(c.lane >> 16);
  m.nlanes = c.nlanes;
  if (m.nlanes == 0 || m.nlanes > kMaxLaneNumber || m.lane >= m.nlanes) return std::nullopt;
  return m;
}

void encode_lane_hello_reply(uint32_t status, uint8_t (&out)[kLaneHelloReplySize]) {
  store_le(out, status, 4);
  store_le(out + 4, 0, 4);
}

uint32_t decode_lane_hello_reply(const uint8_t (&in)[kLaneHelloReplySize]) {
  return static_cast<uint32_t>(load_le(in, 4));
}

bool carries_payload(DataOp op) {
  return op == DataOp::kPersist || op == DataOp::kDeepPersist || op == DataOp::kFlush;
}

void encode(const DataRequest &m, uint8_t (&out)[kDataRequestSize]) {
  encode(RequestHeader{static_cast<uint8_t>(m.op), m.flags, m.offset, m.length}, out);
}

std::optional<DataRequest> decode_data_request(std::span<const uint8_t> b) {
  if (b.size() != kDataRequestSize) return std::nullopt;
  const auto h = decode_request_header(b.data());
  if (!h || h->op < static_cast<uint8_t>(DataOp::kPersist) ||
      h->op > static_cast<uint8_t>(DataOp::kProbe) ||
      (h->flags & ~(kDataRelaxed | kDataVisible)) != 0)
    return std::nullopt;
  DataRequest m{static_cast<DataOp>(h->op), h->flags, h->offset, h->length};
  if (m.op == DataOp::kDrain && (m.offset != 0 || m.length != 0)) return std::nullopt;
  if (m.op == DataOp::kProbe && (m.offset != 0 || m.length != 0 || m.flags != 0))
    return std::nullopt;
  return m;
}

void encode(const DataReply &m, uint8_t (&out)[kDataReplySize]) {
  store_le(out, m.status, 4);
  out[4] = static_cast<uint8_t>(m.op);
  out[5] = 0;
  store_le(out + 6, 0, 2);
  store_le(out + 8, m.length, 8);
}

std::optional<DataReply> decode_data_reply(std::span<const uint8_t> b) {
  if (b.size() != kDataReplySize) return std::nullopt;
  DataReply m;
  m.status = static_cast<uint32_t>(load_le(b.data(), 4));
  uint8_t op = b[4];
  if (op < static_cast<uint8_t>(DataOp::kPersist) || op > static_cast<uint8_t>(DataOp::kProbe) ||
      b[5] != 0 || load_le(b.data() + 6, 2) != 0 || !wire::is_errno(m.status))
    return std::nullopt;
  m.op = static_cast<DataOp>(op);
  m.length = load_le(b.data() + 8, 8);
  return m;
}

}  // namespace rpmem::proto
