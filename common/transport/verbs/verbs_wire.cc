// SPDX-License-Identifier: BSD-3-Clause
// The verbs provider's wire formats.
#include "common/transport/verbs/verbs_wire.h"

#include <sys/socket.h>

#include <cstring>

namespace rpmem::transport::verbs {

namespace {

constexpr uint32_t kConnectMagic = 0x56504d52;  // "RMPV"
constexpr uint32_t kReplyMagic = 0x52504d52;    // "RMPR"

void put(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

proto::Bytes encode(const ProviderInfo &info) {
  proto::Bytes b(kProviderInfoSize, 0);
  put(&b[0], kWireVersion, 4);
  put(&b[4], static_cast<uint32_t>(info.method), 4);
  put(&b[8], info.raddr, 8);
  put(&b[16], info.rkey, 4);
  put(&b[20], info.max_inline, 4);
  put(&b[24], info.family, 2);
  b[26] = info.flags;
  // 27 reserved
  put(&b[28], info.window, 4);
  std::memcpy(&b[32], info.addr.data(), 16);
  return b;
}

std::optional<ProviderInfo> decode_provider_info(std::span<const uint8_t> b) {
  if (b.size() != kProviderInfoSize || get(&b[0], 4) != kWireVersion) return std::nullopt;
  ProviderInfo info;
  const auto method = get(&b[4], 4);
  if (method != static_cast<uint32_t>(proto::PersistMethod::kGpspm) &&
      method != static_cast<uint32_t>(proto::PersistMethod::kApm))
    return std::nullopt;
  info.method = static_cast<proto::PersistMethod>(method);
  info.raddr = get(&b[8], 8);
  info.rkey = static_cast<uint32_t>(get(&b[16], 4));
  info.max_inline = static_cast<uint32_t>(get(&b[20], 4));
  info.family = static_cast<uint16_t>(get(&b[24], 2));
  if (info.max_inline < 64 || info.max_inline > (1u << 20)) return std::nullopt;
  if (info.family != 0 && info.family != AF_INET && info.family != AF_INET6) return std::nullopt;
  info.flags = b[26];
  if ((info.flags & ~(kInfoStaged | kInfoBounded)) != 0 || b[27] != 0) return std::nullopt;
  info.window = static_cast<uint32_t>(get(&b[28], 4));
  // A bounded lane needs a window of at least one page; other lanes none.
  if ((info.flags & kInfoBounded) ? info.window < 4096 : info.window != 0) return std::nullopt;
  std::memcpy(info.addr.data(), &b[32], 16);
  return info;
}

void encode(const ConnectData &c, uint8_t (&out)[kConnectDataSize]) {
  put(out, kConnectMagic, 4);
  std::memcpy(out + 4, c.secret.data(), c.secret.size());
  put(out + 36, c.lane, 4);
  put(out + 40, c.nlanes, 4);
}

std::optional<ConnectData> decode_connect_data(std::span<const uint8_t> b) {
  if (b.size() < kConnectDataSize || get(b.data(), 4) != kConnectMagic) return std::nullopt;
  ConnectData c;
  std::memcpy(c.secret.data(), b.data() + 4, c.secret.size());
  c.lane = static_cast<uint32_t>(get(b.data() + 36, 4));
  c.nlanes = static_cast<uint32_t>(get(b.data() + 40, 4));
  if (c.nlanes == 0 || c.lane >= c.nlanes) return std::nullopt;
  return c;
}

void encode(const MsgHeader &m, uint8_t *out) {
  out[0] = static_cast<uint8_t>(m.op);
  out[1] = m.flags;
  put(out + 2, 0, 6);
  put(out + 8, m.offset, 8);
  put(out + 16, m.length, 8);
}

std::optional<MsgHeader> decode_msg(std::span<const uint8_t> received) {
  if (received.size() < kMsgHeaderSize || received.size() > kMsgHeaderSize + kMaxInline)
    return std::nullopt;
  const uint8_t *p = received.data();
  MsgHeader m;
  if (p[0] < 1 || p[0] > 4) return std::nullopt;
  m.op = static_cast<MsgOp>(p[0]);
  m.flags = p[1];
  if (get(p + 2, 6) != 0) return std::nullopt;
  m.offset = get(p + 8, 8);
  m.length = get(p + 16, 8);
  const size_t payload = received.size() - kMsgHeaderSize;
  if (m.op == MsgOp::kDrain) {
    if (m.flags != 0 || m.offset != 0 || m.length > kMaxInline / kRangeSize ||
        payload != m.length * kRangeSize)
      return std::nullopt;
  } else if (m.op == MsgOp::kRead) {
    if (m.flags != 0 || payload != 0) return std::nullopt;
  } else if (m.flags == kMsgInline) {
    if (payload != m.length) return std::nullopt;
  } else if (m.flags != 0 || payload != 0) {
    return std::nullopt;
  }
  return m;
}

void encode_range(uint64_t offset, uint64_t length, uint8_t *out) {
  put(out, offset, 8);
  put(out + 8, length, 8);
}

void decode_range(const uint8_t *in, uint64_t &offset, uint64_t &length) {
  offset = get(in, 8);
  length = get(in + 8, 8);
}

void encode_reply(uint32_t status, uint8_t *out) {
  put(out, kReplyMagic, 4);
  put(out + 4, status, 4);
}

std::optional<uint32_t> decode_reply(std::span<const uint8_t> received) {
  if (received.size() != kReplySize || get(received.data(), 4) != kReplyMagic) return std::nullopt;
  const auto status = static_cast<uint32_t>(get(received.data() + 4, 4));
  if (status >= 4096) return std::nullopt;
  return status;
}

}  // namespace rpmem::transport::verbs
