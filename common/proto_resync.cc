// SPDX-License-Identifier: BSD-3-Clause
// The control channel's messages of a pool that ran ahead of its target and
// catches up (protocol minor 10): the client's report of its pool, and the
// checksums of pages it asks of the target.
#include "common/proto.h"

namespace rpmem::proto {
namespace {

// A frame of `type`: its header, the payload written by `body`.
template <class Body>
Bytes frame(MsgType type, Body &&body) {
  wire::Writer w;
  w.u16(static_cast<uint16_t>(type));
  w.u16(0);
  w.u32(0);
  body(w);
  wire::store_le(w.at(4), w.size() - kFrameHeaderSize, 4);
  return w.take();
}

}  // namespace

Bytes encode(const PoolStateReport &m) {
  return frame(MsgType::kPoolState, [&](wire::Writer &w) {
    w.u32(static_cast<uint32_t>(m.state));
    w.u32(0);
    w.u64(m.bytes_left);
    w.u64(m.bytes_done);
    w.u64(m.behind_ms);
  });
}

Bytes encode(const ChecksumRequest &m) {
  return frame(MsgType::kChecksum, [&](wire::Writer &w) {
    w.u32(static_cast<uint32_t>(m.ranges.size()));
    for (const PageRange &r : m.ranges) {
      w.u64(r.first);
      w.u32(r.count);
      w.u32(0);
    }
  });
}

Bytes encode(const ChecksumResponse &m) {
  return frame(MsgType::kChecksumResp, [&](wire::Writer &w) {
    w.u32(static_cast<uint32_t>(m.status));
    w.u32(static_cast<uint32_t>(m.sums.size()));
    for (uint64_t s : m.sums) w.u64(s);
  });
}

std::optional<PoolStateReport> decode_pool_state(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  PoolStateReport m;
  const uint32_t state = r.u32();
  const uint32_t reserved = r.u32();
  m.bytes_left = r.u64();
  m.bytes_done = r.u64();
  m.behind_ms = r.u64();
  if (!r.done() || reserved != 0 || state > static_cast<uint32_t>(PoolSync::kResyncing))
    return std::nullopt;
  m.state = static_cast<PoolSync>(state);
  return m;
}

std::optional<ChecksumRequest> decode_checksum_request(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  const uint32_t n = r.u32();
  if (!r.ok() || n == 0 || n > kMaxChecksumRanges) return std::nullopt;
  ChecksumRequest m;
  m.ranges.reserve(n);
  uint64_t pages = 0;
  for (uint32_t i = 0; i < n; ++i) {
    PageRange pr;
    pr.first = r.u64();
    pr.count = r.u32();
    if (r.u32() != 0 || pr.count == 0) return std::nullopt;
    pages += pr.count;
    if (pages > kMaxChecksumPages) return std::nullopt;
    m.ranges.push_back(pr);
  }
  if (!r.done()) return std::nullopt;
  return m;
}

std::optional<ChecksumResponse> decode_checksum_response(std::span<const uint8_t> payload) {
  wire::Reader r(payload);
  ChecksumResponse m;
  const uint32_t status = r.u32();
  const uint32_t n = r.u32();
  if (!r.ok() || status >= static_cast<uint32_t>(Status::kCount) || n > kMaxChecksumPages)
    return std::nullopt;
  m.status = static_cast<Status>(status);
  m.sums.resize(n);
  for (auto &s : m.sums) s = r.u64();
  if (!r.done()) return std::nullopt;
  return m;
}

}  // namespace rpmem::proto
