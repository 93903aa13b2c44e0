// SPDX-License-Identifier: BSD-3-Clause
// The verbs provider's wire formats, at their fixed offsets (wire.h's
// little-endian integers; the request header and the lane claim are
// proto.h's, shared with tcp lanes).
#include "common/transport/verbs/verbs_wire.h"

#include <sys/socket.h>

#include <cstring>

namespace rpmem::transport::verbs {

namespace {

constexpr uint32_t kConnectMagic = 0x56504d52;  // "RMPV"
constexpr uint32_t kReplyMagic = 0x52504d52;    // "RMPR"

}  // namespace

using wire::load_le;
using wire::store_le;

proto::Bytes encode(const ProviderInfo &info) {
  proto::Bytes b(kProviderInfoSize, 0);
  store_le(&b[0], kWireVersion, 4);
  store_le(&b[4], static_cast<uint32_t>(info.method), 4);
  store_le(&b[8], info.raddr, 8);
  store_le(&b[16], info.rkey, 4);
  store_le(&b[20], info.max_inline, 4);
  store_le(&b[24], info.family, 2);
  b[26] = info.flags;
  // 27 reserved
  store_le(&b[28], info.window, 4);
  std::memcpy(&b[32], info.addr.data(), 16);
  return b;
}

std::optional<ProviderInfo> decode_provider_info(std::span<const uint8_t> b) {
  if (b.size() != kProviderInfoSize || load_le(&b[0], 4) != kWireVersion) return std::nullopt;
  ProviderInfo info;
  const auto method = load_le(&b[4], 4);
  if (method != static_cast<uint32_t>(proto::PersistMethod::kGpspm) &&
      method != static_cast<uint32_t>(proto::PersistMethod::kApm))
    return std::nullopt;
  info.method = static_cast<proto::PersistMethod>(method);
  info.raddr = load_le(&b[8], 8);
  info.rkey = static_cast<uint32_t>(load_le(&b[16], 4));
  info.max_inline = static_cast<uint32_t>(load_le(&b[20], 4));
  info.family = static_cast<uint16_t>(load_le(&b[24], 2));
  if (info.max_inline < 64 || info.max_inline > (1u << 20)) return std::nullopt;
  if (info.family != 0 && info.family != AF_INET && info.family != AF_INET6) return std::nullopt;
  info.flags = b[26];
  if ((info.flags & ~(kInfoStaged | kInfoBounded)) != 0 || b[27] != 0) return std::nullopt;
  info.window = static_cast<uint32_t>(load_le(&b[28], 4));
  // A bounded lane needs a window of at least one page; other lanes none.
  if ((info.flags & kInfoBounded) ? info.window < 4096 : info.window != 0) return std::nullopt;
  std::memcpy(info.addr.data(), &b[32], 16);
  return info;
}

void encode(const ConnectData &c, uint8_t (&out)[kConnectDataSize]) {
  store_le(out, kConnectMagic, 4);
  proto::encode(
      proto::LaneClaim{c.proof, (c.lane & proto::kMaxLaneNumber) | uint32_t{c.epoch} << 16,
                       c.nlanes},
      out + 4);
}

std::optional<ConnectData> decode_connect_data(std::span<const uint8_t> b) {
  if (b.size() < kConnectDataSize || load_le(b.data(), 4) != kConnectMagic) return std::nullopt;
  const proto::LaneClaim claim = proto::decode_lane_claim(b.data() + 4);
  const ConnectData c{claim.proof, claim.lane & proto::kMaxLaneNumber,
                      static_cast<uint16_t>(claim.lane >> 16), claim.nlanes};
  if (c.nlanes == 0 || c.lane >= c.nlanes) return std::nullopt;
  return c;
}

void encode(const MsgHeader &m, uint8_t *out) {
  proto::encode(proto::RequestHeader{static_cast<uint8_t>(m.op), m.flags, m.offset, m.length}, out);
}

std::optional<MsgHeader> decode_msg(std::span<const uint8_t> received) {
  if (received.size() < kMsgHeaderSize || received.size() > kMsgHeaderSize + kMaxInline)
    return std::nullopt;
  const auto h = proto::decode_request_header(received.data());
  if (!h || h->op < static_cast<uint8_t>(MsgOp::kPersist) ||
      h->op > static_cast<uint8_t>(MsgOp::kRead))
    return std::nullopt;
  MsgHeader m{static_cast<MsgOp>(h->op), h->flags, h->offset, h->length};
  const size_t payload = received.size() - kMsgHeaderSize;
  const uint8_t inline_flag = m.flags & kMsgInline;
  if (m.op == MsgOp::kDrain) {
    if ((m.flags & ~kMsgVisible) != 0 || m.offset != 0 || m.length > kMaxInline / kRangeSize ||
        payload != m.length * kRangeSize)
      return std::nullopt;
  } else if (m.op == MsgOp::kRead) {
    if (m.flags != 0 || payload != 0) return std::nullopt;
  } else if ((m.flags & ~(kMsgInline | kMsgVisible)) != 0) {
    return std::nullopt;
  } else if (payload != (inline_flag ? m.length : 0)) {
    return std::nullopt;
  }
  return m;
}

void encode_range(uint64_t offset, uint64_t length, uint8_t *out) {
  store_le(out, offset, 8);
  store_le(out + 8, length, 8);
}

void decode_range(const uint8_t *in, uint64_t &offset, uint64_t &length) {
  offset = load_le(in, 8);
  length = load_le(in + 8, 8);
}

void encode_reply(uint32_t status, uint8_t *out) {
  store_le(out, kReplyMagic, 4);
  store_le(out + 4, status, 4);
}

std::optional<uint32_t> decode_reply(std::span<const uint8_t> received) {
  if (received.size() != kReplySize || load_le(received.data(), 4) != kReplyMagic)
    return std::nullopt;
  const auto status = static_cast<uint32_t>(load_le(received.data() + 4, 4));
  if (!wire::is_errno(status)) return std::nullopt;
  return status;
}

}  // namespace rpmem::transport::verbs
