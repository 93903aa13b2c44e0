// SPDX-License-Identifier: BSD-3-Clause
// The control channel's messages, encoded and decoded (little-endian, with
// wire.h's Reader and Writer), and the wire status codes against errno.
// The data lanes' messages are proto_lane.cc's.
#include "common/proto.h"

#include <cerrno>
#include <cstring>

namespace rpmem::proto {
namespace {

using wire::load_le;
using wire::store_le;

// A frame: its header first, the payload size patched by finish().
class Writer : public wire::Writer {
 public:
  explicit Writer(MsgType type) {
    u16(static_cast<uint16_t>(type));
    u16(0);
    u32(0);
  }
  void attr(const PoolAttr &a) { encode_attr(a, grow(kPoolAttrWireSize)); }
  Bytes finish() {
    store_le(at(4), size() - kFrameHeaderSize, 4);
    return take();
  }
};

// A payload, with the pool attributes among its fields.
class Reader : public wire::Reader {
 public:
  using wire::Reader::Reader;
  PoolAttr attr() {
    const uint8_t *p = take(kPoolAttrWireSize);
    return p ? decode_attr(p) : PoolAttr{};
  }
};

struct StatusInfo {
  int err;
  const char *msg;
};
constexpr StatusInfo kStatusTable[] = {
    {0, "Success"},
    {EPROTONOSUPPORT, "Protocol version number mismatch"},
    {EINVAL, "Invalid pool descriptor"},
    {EFBIG, "Invalid pool size"},
    {EINVAL, "Invalid number of lanes"},
    {EINVAL, "Invalid provider"},
    {EREMOTEIO, "Fatal error"},
    {ECONNABORTED, "Fatal in-band connection error"},
    {EBUSY, "Pool already in use"},
    {EEXIST, "Pool already exists"},
    {EMEDIUMTYPE, "Provider not supported"},
    {ENOENT, "Pool set or its part doesn't exist or it is unavailable"},
    {EACCES, "Pool set permission denied"},
    {EINVAL, "Invalid pool set configuration"},
    {ESTALE, "Pool opened by another session since"},
    {ENOTSUP, "Durability level not granted by the target"},
    {ESTALE, "Pool may be behind its master"},
};
static_assert(std::size(kStatusTable) == static_cast<size_t>(Status::kCount));

}  // namespace

int status_to_errno(Status s) {
  auto i = static_cast<uint32_t>(s);
  return i < std::size(kStatusTable) ? kStatusTable[i].err : EPROTO;
}

const char *status_message(Status s) {
  auto i = static_cast<uint32_t>(s);
  return i < std::size(kStatusTable) ? kStatusTable[i].msg : "Invalid status";
}

Status errno_to_status(int err) {
  switch (err) {
    case 0:
      return Status::kSuccess;
    case EEXIST:
      return Status::kExists;
    case EACCES:
      return Status::kNoAccess;
    case ENOENT:
      return Status::kNoExist;
    case EWOULDBLOCK:
      return Status::kBusy;
    case EBADF:
      return Status::kBadName;
    case EINVAL:
      return Status::kPoolCfg;
    case EFBIG:
      return Status::kBadSize;
    default:
      return Status::kFatal;
  }
}

void encode_attr(const PoolAttr &a, uint8_t *out) {
  std::memcpy(out, a.signature.data(), 8);
  store_le(out + 8, a.major, 4);
  store_le(out + 12, a.compat_features, 4);
  store_le(out + 16, a.incompat_features, 4);
  store_le(out + 20, a.ro_compat_features, 4);
  std::memcpy(out + 24, a.poolset_uuid.data(), 16);
  std::memcpy(out + 40, a.uuid.data(), 16);
  std::memcpy(out + 56, a.next_uuid.data(), 16);
  std::memcpy(out + 72, a.prev_uuid.data(), 16);
  std::memcpy(out + 88, a.user_flags.data(), 16);
}

PoolAttr decode_attr(const uint8_t *in) {
  PoolAttr a;
  std::memcpy(a.signature.data(), in, 8);
  a.major = static_cast<uint32_t>(load_le(in + 8, 4));
  a.compat_features = static_cast<uint32_t>(load_le(in + 12, 4));
  a.incompat_features = static_cast<uint32_t>(load_le(in + 16, 4));
  a.ro_compat_features = static_cast<uint32_t>(load_le(in + 20, 4));
  std::memcpy(a.poolset_uuid.data(), in + 24, 16);
  std::memcpy(a.uuid.data(), in + 40, 16);
  std::memcpy(a.next_uuid.data(), in + 56, 16);
  std::memcpy(a.prev_uuid.data(), in + 72, 16);
  std::memcpy(a.user_flags.data(), in + 88, 16);
  return a;
}

Bytes encode(const Hello &m) {
  Writer w(MsgType::kHello);
  w.u16(m.major);
  w.u16(m.minor);
  w.u32(m.status);
  w.u32(m.transports);
  return w.finish();
}

Bytes encode(MsgType type, const PoolRequest &m) {
  Writer w(type);
  w.u16(m.major);
  w.u16(m.minor);
  w.u32(m.nlanes);
  w.u64(m.pool_size);
  w.u32(m.transports);
  w.u32(m.lane_flags);
  w.attr(m.attr);
  w.u16(static_cast<uint16_t>(m.pool_set.size()));
  w.u16(0);
  w.raw(m.pool_set.data(), m.pool_set.size());
  if (m.extended) {
    w.u32(m.reopen ? 1 : 0);
    w.raw(m.token.data(), m.token.size());
    if (m.leveled) {
      w.u32(static_cast<uint32_t>(m.durability));
      if (m.ahead) w.u32(m.ahead_flags);
    }
  }
  return w.finish();
}

Bytes encode(const PoolResponse &m) {
  Writer w(MsgType::kPoolResp);
  w.u32(static_cast<uint32_t>(m.status));
  w.u32(m.nlanes);
  w.u16(m.port);
  w.u16(static_cast<uint16_t>(m.transport));
  w.u32(static_cast<uint32_t>(m.method));
  w.u32(m.pool_flags);
  w.u64(m.remote_size);
  w.raw(m.secret.data(), m.secret.size());
  w.attr(m.attr);
  w.u16(static_cast<uint16_t>(m.provider_data.size()));
  w.u16(0);
  w.raw(m.provider_data.data(), m.provider_data.size());
  if (m.extended) {
    w.u32(m.lane_flags);
    w.u16(static_cast<uint16_t>(m.lane_psk.size()));
    w.u16(0);
    w.raw(m.lane_psk.data(), m.lane_psk.size());
    if (m.tokened) {
      w.u16(static_cast<uint16_t>(m.token.size()));
      w.u16(0);
      w.raw(m.token.data(), m.token.size());
      if (m.leveled) w.u32(m.levels);
    }
  }
  return w.finish();
}

Bytes encode(const SetAttrRequest &m) {
  Writer w(MsgType::kSetAttr);
  w.attr(m.attr);
  return w.finish();
}

Bytes encode(const CloseRequest &m) {
  Writer w(MsgType::kClose);
  w.u32(m.flags);
  return w.finish();
}

Bytes encode_keepalive() { return Writer(MsgType::kKeepalive).finish(); }

Bytes encode(const RemoveRequest &m) {
  Writer w(MsgType::kRemove);
  w.u32(m.flags);
  w.u16(static_cast<uint16_t>(m.pool_set.size()));
  w.u16(0);
  w.raw(m.pool_set.data(), m.pool_set.size());
  return w.finish();
}

Bytes encode(MsgType type, const StatusResponse &m) {
  Writer w(type);
  w.u32(static_cast<uint32_t>(m.status));
  return w.finish();
}

std::optional<FrameHeader> decode_frame_header(std::span<const uint8_t> b) {
  Reader r(b);
  uint16_t type = r.u16();
  uint16_t reserved = r.u16();
  uint32_t size = r.u32();
  if (!r.done() || reserved != 0 || size > kMaxControlPayload) return std::nullopt;
  if (type < static_cast<uint16_t>(MsgType::kHello) ||
      type > static_cast<uint16_t>(MsgType::kChecksumResp))
    return std::nullopt;
  return FrameHeader{static_cast<MsgType>(type), size};
}

std::optional<Hello> decode_hello(std::span<const uint8_t> payload) {
  Reader r(payload);
  Hello m;
  m.major = r.u16();
  m.minor = r.u16();
  m.status = r.u32();
  m.transports = r.u32();
  if (!r.done()) return std::nullopt;
  return m;
}

std::optional<PoolRequest> decode_pool_request(std::span<const uint8_t> payload) {
  Reader r(payload);
  PoolRequest m;
  m.major = r.u16();
  m.minor = r.u16();
  m.nlanes = r.u32();
  m.pool_size = r.u64();
  m.transports = r.u32();
  m.lane_flags = r.u32();
  m.attr = r.attr();
  uint16_t name_len = r.u16();
  uint16_t reserved2 = r.u16();
  if (!r.ok() || (m.lane_flags & ~kLaneFlags) != 0 || reserved2 != 0 || name_len == 0 ||
      name_len > kMaxPoolSetName)
    return std::nullopt;
  m.pool_set.resize(name_len);
  r.raw(m.pool_set.data(), name_len);
  if (r.ok() && !r.done() && m.minor >= kMinorResume) {  // the reopen extension
    m.extended = true;
    const uint32_t reopen = r.u32();
    r.raw(m.token.data(), m.token.size());
    if (reopen > 1) return std::nullopt;
    m.reopen = reopen == 1;
    if (r.ok() && !r.done() && m.minor >= kMinorLevels) {  // the level extension
      m.leveled = true;
      const uint32_t level = r.u32();
      if (level >= kLevelsMax) return std::nullopt;
      m.durability = static_cast<Durability>(level);
      if (r.ok() && !r.done() && m.minor >= kMinorRunAhead) {  // the run-ahead extension
        m.ahead = true;
        m.ahead_flags = r.u32();
        if ((m.ahead_flags & ~kAheadFlags) != 0) return std::nullopt;
      }
    }
  }
  if (!r.done() || m.pool_set.find('\0') != std::string::npos) return std::nullopt;
  return m;
}

std::optional<PoolResponse> decode_pool_response(std::span<const uint8_t> payload) {
  Reader r(payload);
  PoolResponse m;
  uint32_t status = r.u32();
  m.nlanes = r.u32();
  m.port = r.u16();
  uint16_t transport = r.u16();
  uint32_t method = r.u32();
  m.pool_flags = r.u32();
  m.remote_size = r.u64();
  r.raw(m.secret.data(), m.secret.size());
  m.attr = r.attr();
  uint16_t pdata_len = r.u16();
  uint16_t reserved = r.u16();
  if (!r.ok() || reserved != 0 || pdata_len > kMaxProviderData ||
      (m.pool_flags & ~kPoolHasHeaders) != 0)
    return std::nullopt;
  if (status >= static_cast<uint32_t>(Status::kCount)) return std::nullopt;
  m.status = static_cast<Status>(status);
  m.provider_data.resize(pdata_len);
  r.raw(m.provider_data.data(), pdata_len);
  if (r.ok() && !r.done()) {  // the lane security extension
    m.extended = true;
    m.lane_flags = r.u32();
    uint16_t psk_len = r.u16();
    uint16_t reserved3 = r.u16();
    if (!r.ok() || (m.lane_flags & ~kLaneFlags) != 0 || reserved3 != 0 || psk_len > kMaxLanePsk)
      return std::nullopt;
    m.lane_psk.resize(psk_len);
    r.raw(m.lane_psk.data(), psk_len);
    if (r.ok() && !r.done()) {  // the token extension
      m.tokened = true;
      const uint16_t token_len = r.u16();
      const uint16_t reserved4 = r.u16();
      if (!r.ok() || reserved4 != 0 || (token_len != 0 && token_len != kTokenSize))
        return std::nullopt;
      m.token.resize(token_len);
      r.raw(m.token.data(), token_len);
      if (r.ok() && !r.done()) {  // the level extension
        m.leveled = true;
        m.levels = r.u32();
        if (!r.ok() || (m.levels & ~((1u << kLevelsMax) - 1)) != 0 ||
            (m.levels & level_bit(Durability::kPersistent)) == 0)
          return std::nullopt;
      }
    }
  }
  if (!r.done()) return std::nullopt;
  if (m.status == Status::kSuccess) {
    // A success must name a transport and method we know, lanes and a port.
    if ((transport != static_cast<uint16_t>(TransportKind::kTcp) &&
         transport != static_cast<uint16_t>(TransportKind::kVerbs)) ||
        (method != static_cast<uint32_t>(PersistMethod::kGpspm) &&
         method != static_cast<uint32_t>(PersistMethod::kApm)) ||
        m.nlanes == 0 || m.port == 0)
      return std::nullopt;
  }
  m.transport = static_cast<TransportKind>(transport);
  m.method = method == static_cast<uint32_t>(PersistMethod::kApm) ? PersistMethod::kApm
                                                                  : PersistMethod::kGpspm;
  return m;
}

std::optional<SetAttrRequest> decode_set_attr(std::span<const uint8_t> payload) {
  Reader r(payload);
  SetAttrRequest m;
  m.attr = r.attr();
  if (!r.done()) return std::nullopt;
  return m;
}

std::optional<CloseRequest> decode_close(std::span<const uint8_t> payload) {
  Reader r(payload);
  CloseRequest m;
  m.flags = r.u32();
  if (!r.done() || (m.flags & ~kCloseRemove) != 0) return std::nullopt;
  return m;
}

std::optional<RemoveRequest> decode_remove(std::span<const uint8_t> payload) {
  Reader r(payload);
  RemoveRequest m;
  m.flags = r.u32();
  uint16_t name_len = r.u16();
  uint16_t reserved = r.u16();
  if (!r.ok() || reserved != 0 || (m.flags & ~(kRemoveForce | kRemovePoolSet)) != 0 ||
      name_len == 0 || name_len > kMaxPoolSetName)
    return std::nullopt;
  m.pool_set.resize(name_len);
  r.raw(m.pool_set.data(), name_len);
  if (!r.done() || m.pool_set.find('\0') != std::string::npos) return std::nullopt;
  return m;
}

std::optional<StatusResponse> decode_status_response(std::span<const uint8_t> payload) {
  Reader r(payload);
  uint32_t status = r.u32();
  if (!r.done() || status >= static_cast<uint32_t>(Status::kCount)) return std::nullopt;
  return StatusResponse{static_cast<Status>(status)};
}

}  // namespace rpmem::proto
