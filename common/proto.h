// SPDX-License-Identifier: BSD-3-Clause
// The rpmem wire protocol: every message both sides exchange, with explicit
// little-endian encode/decode functions. Nothing else parses network bytes.
//
// Control channel (ssh stdin/stdout, or a service connection): frames of
//   FrameHeader{u16 type, u16 reserved = 0, u32 payload size} + payload.
//   rpmemd speaks first (kHello), then the client sends one kCreate/kOpen,
//   any number of kSetAttr, and one kClose. Every reply carries a status.
// Data lanes (one connection each): kLaneHello first, then DataRequest
//   headers (+ payload for writes), each answered with a DataReply unless the
//   op is kFlush.
//
// Decoders never read past the given span, bound every length, and return
// std::nullopt for anything malformed. The integers and the lane operations
// they are made of are wire.h's; proto_control.cc encodes the control
// channel, proto_lane.cc the data lanes.
#ifndef RPMEM_COMMON_PROTO_H
#define RPMEM_COMMON_PROTO_H

#include "common/pool_attr.h"
#include "common/wire.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rpmem::proto {

inline constexpr uint16_t kMajor = 1;
// Minor 1: the daemon takes kKeepalive (the client sends it only to a
// daemon whose hello says minor >= 1).
// Minor 2: the verbs provider data may carry flags (kInfoStaged); the
// daemon sets them only for a client whose pool request says minor >= 2.
// Minor 3: TLS data lanes. A client of minor >= 3 may set
// PoolRequest::lane_flags (only towards a daemon whose hello says minor >= 3)
// and understands PoolResponse's lane security extension, which the daemon
// adds only for such a client.
// Minor 4: the verbs provider's bounded landing path (kInfoBounded). A pool
// that cannot be registered is served over verbs only to such a client; an
// older one is refused verbs for it (and takes tcp if it offered it).
// Minor 5: sealed data lanes (kLaneSealed). A client of minor >= 5 may set
// it beside kLaneTls (only towards a daemon whose hello says minor >= 5):
// it can seal; the daemon answers kLaneTls | kLaneSealed when the lanes are
// sealed rather than inside TLS.
// Minor 6: lanes and sessions that come back. A lane hello may carry an
// epoch above 0: the lane connects again within its session (its
// connection broke or stalled) and the target serves it on the new
// connection from then on. A service's pool response carries a session
// token (PoolResponse's token extension, for a client of minor >= 6), and
// a pool request may carry one back (PoolRequest's reopen extension, only
// towards a daemon whose hello says minor >= 6): the client reopens its
// pool after the service restarted, and is refused (kStale) when another
// session opened the pool in between. A client sends epochs above 0 only
// to a daemon of minor >= 6.
// Minor 7: durability levels. A pool request may carry the level the client
// asks for its pool (PoolRequest's level extension, only towards a daemon
// whose hello says minor >= 7, and only after the reopen extension); a pool
// response carries the levels the target grants (PoolResponse's level
// extension, for a client of minor >= 7, after the token extension), or
// kNoLevel when it does not grant the level asked for. A lane request may
// then carry kDataVisible, only on a session granted visible.
// Minor 8: verbs lanes that come back. A verbs lane's connect request may
// carry an epoch above 0 (verbs ConnectData, as a tcp lane hello does since
// minor 6): its queue pair failed, and the target serves the lane on the
// new one from then on. A client sends such epochs only to a daemon whose
// hello says minor >= 8 (an older one refuses them as malformed).
// Minor 9: lane claims prove the secret and never show it. A client of
// minor >= 9 fills a claim's proof with a fresh nonce and a MAC keyed by
// the secret (transport/lane_proof.h), towards a daemon whose hello says
// minor >= 9; the daemon expects it from a client whose pool request says
// minor >= 9, and takes the secret itself from an older client, at epoch
// 0 only where it crossed the wire in clear. Sealed lanes of such a session
// key each connection with nonces of both ends (tcp/sealed_stream.h).
// Minor 10: pools that run ahead of a lost target (RPMEM_ON_LOSS=continue)
// and catch up. A pool request may carry the run-ahead extension (after the
// level extension; only towards a daemon of minor >= 10): u32 flags,
// kRunAhead (the client's pool goes on without its target when it loses
// it: the daemon gives the session a token and marks the pool durably, in
// ssh mode too, until the client closes it) and kOpenBehind (the opener's
// override: open a pool so marked, though it may be behind its master). A
// daemon of minor >= 10 answers any other open of a marked pool with
// kBehind. A client of minor >= 10 reports its pool's catch-up (kPoolState,
// no reply) and asks checksums of the pool's pages (kChecksum, answered by
// kChecksumResp), both only to a daemon of minor >= 10.
// Minor 11: probes on tcp lanes. A lane request may be kProbe (no payload,
// an empty reply): a client waiting for a reply longer than it should sends
// one, only to a daemon whose hello says minor >= 11 (an older one refuses
// it as malformed); the daemon answers it in its turn, behind the request
// before it.
inline constexpr uint16_t kMinor = 11;
inline constexpr uint16_t kMinorKeepalive = 1;
inline constexpr uint16_t kMinorStaged = 2;
inline constexpr uint16_t kMinorLaneTls = 3;
inline constexpr uint16_t kMinorBounded = 4;
inline constexpr uint16_t kMinorSealed = 5;
inline constexpr uint16_t kMinorResume = 6;
inline constexpr uint16_t kMinorLevels = 7;
inline constexpr uint16_t kMinorVerbsResume = 8;
inline constexpr uint16_t kMinorProofs = 9;
inline constexpr uint16_t kMinorRunAhead = 10;
inline constexpr uint16_t kMinorProbes = 11;

inline constexpr size_t kFrameHeaderSize = 8;
inline constexpr uint32_t kMaxControlPayload = 64 * 1024;
inline constexpr size_t kMaxPoolSetName = 4096;
inline constexpr size_t kMaxProviderData = 256;
inline constexpr size_t kSecretSize = 32;
inline constexpr size_t kPoolAttrWireSize = 104;

enum class MsgType : uint16_t {
  kHello = 1,
  kCreate = 2,
  kOpen = 3,
  kPoolResp = 4,
  kSetAttr = 5,
  kSetAttrResp = 6,
  kClose = 7,
  kCloseResp = 8,
  kRemove = 9,  // service mode: what `rpmemd --remove` does in ssh mode
  kRemoveResp = 10,
  kKeepalive = 11,  // client -> rpmemd, no payload, no reply: "still here"
  kPoolState = 12,  // client -> rpmemd, no reply: its pool's catch-up (minor 10)
  kChecksum = 13,   // client -> rpmemd: checksums of pages, please (minor 10)
  kChecksumResp = 14,
};

// Status codes in control replies, as PMDK's enum rpmem_err.
enum class Status : uint32_t {
  kSuccess = 0,
  kBadProto = 1,
  kBadName = 2,
  kBadSize = 3,
  kBadNlanes = 4,
  kBadProvider = 5,
  kFatal = 6,
  kFatalConn = 7,
  kBusy = 8,
  kExists = 9,
  kProvNoSup = 10,
  kNoExist = 11,
  kNoAccess = 12,
  kPoolCfg = 13,
  // Minor 6: a reopen whose token is not the pool's latest (another
  // session opened it since); sent only in reply to a reopen.
  kStale = 14,
  // Minor 7: the durability level asked for is not granted (rpmemd's
  // durability-visible is off); sent only to a client of minor >= 7.
  kNoLevel = 15,
  // Minor 10: the pool may be behind its master (a session that could run
  // ahead of it ended without a close); sent only to a client of minor >= 10
  // (an older one gets kBusy).
  kBehind = 16,
  kCount = 17,
};

// Status -> errno on the client, and the fixed message for rpmem_errormsg().
int status_to_errno(Status s);
const char *status_message(Status s);
// errno of a target-side pool operation -> Status (PMDK's table).
Status errno_to_status(int err);

// Transport kinds, also used as a bit mask of what a side offers.
enum class TransportKind : uint16_t { kNone = 0, kTcp = 1, kVerbs = 2 };
inline constexpr uint32_t transport_bit(TransportKind k) { return 1u << static_cast<uint16_t>(k); }

enum class PersistMethod : uint32_t { kGpspm = 1, kApm = 2 };

// Their names, as logs and the status give them: "tcp", "verbs"; "GPSPM",
// "APM".
constexpr const char *transport_name(TransportKind k) noexcept {
  return k == TransportKind::kVerbs ? "verbs" : k == TransportKind::kTcp ? "tcp" : "none";
}
constexpr const char *method_name(PersistMethod m) noexcept {
  return m == PersistMethod::kApm ? "APM" : "GPSPM";
}

// How far an acknowledged byte has gone (rpma_flush's two types).
// kPersistent: durable, it survives the target's power loss. kVisible: in
// the target's memory (its page cache, RAM, CPU caches), where the pool's
// own reads see it; it survives the death of the client and of rpmemd, and
// is made persistent by a later persistent request of its lane, the pool's
// close, or the target's write-back bound, whichever comes first.
enum class Durability : uint32_t { kPersistent = 0, kVisible = 1 };
inline constexpr uint32_t kLevelsMax = 2;
constexpr uint32_t level_bit(Durability d) noexcept { return 1u << static_cast<uint32_t>(d); }
constexpr const char *durability_name(Durability d) noexcept {
  return d == Durability::kVisible ? "visible" : "persistent";
}

using Secret = std::array<uint8_t, kSecretSize>;
// Which session last opened a service's pool (minor 6).
inline constexpr size_t kTokenSize = 16;
using SessionToken = std::array<uint8_t, kTokenSize>;
using Bytes = std::vector<uint8_t>;

struct FrameHeader {
  MsgType type;
  uint32_t size;  // payload bytes that follow
};

struct Hello {  // rpmemd -> client, first message
  uint16_t major = kMajor;
  uint16_t minor = kMinor;
  uint32_t status = 0;      // 0, or rpmemd's errno (it exits after sending it)
  uint32_t transports = 0;  // bit mask of transport_bit()
};

struct PoolRequest {  // kCreate / kOpen
  uint16_t major = kMajor;
  uint16_t minor = kMinor;
  uint32_t nlanes = 0;
  uint64_t pool_size = 0;
  uint32_t transports = 0;  // what the client accepts, bit mask
  uint32_t lane_flags = 0;  // kLaneTls: the client wants TLS data lanes (0 before minor 3)
  PoolAttr attr{};          // kCreate only; all-zero means "no headers"
  std::string pool_set;
  // The reopen extension (minor 6), after pool_set: u32 reopen (0 or 1),
  // the token. Sent only to a daemon of minor >= 6 (`extended`); with
  // `reopen`, a kOpen reopens the pool as the session `token` was given to.
  bool extended = false;
  bool reopen = false;
  SessionToken token{};
  // The level extension (minor 7), after the reopen extension: u32 the
  // pool's level. Sent only to a daemon of minor >= 7 (`leveled`, which
  // needs `extended`); without it the pool is persistent.
  bool leveled = false;
  Durability durability = Durability::kPersistent;
  // The run-ahead extension (minor 10), after the level extension: u32
  // flags (kRunAhead, kOpenBehind). Sent only to a daemon of minor >= 10
  // (`ahead`, which needs `leveled`).
  bool ahead = false;
  uint32_t ahead_flags = 0;
};

// PoolRequest::ahead_flags.
inline constexpr uint32_t kRunAhead = 1;
inline constexpr uint32_t kOpenBehind = 2;
inline constexpr uint32_t kAheadFlags = kRunAhead | kOpenBehind;

inline constexpr uint32_t kPoolHasHeaders = 1;  // offsets below 4096 are the header

// PoolRequest::lane_flags and PoolResponse::lane_flags: the data lanes run
// inside TLS.
inline constexpr uint32_t kLaneTls = 1;
// ... and beside it: the lanes are sealed frames (sealed_stream.h), keyed
// from the control channel (its TLS exporter, or in ssh mode lane_psk).
inline constexpr uint32_t kLaneSealed = 2;
inline constexpr uint32_t kLaneFlags = kLaneTls | kLaneSealed;
inline constexpr size_t kMaxLanePsk = 64;

// A session's lanes by what carries them (`lane_flags` as a PoolResponse
// has them): "verbs", "tcp", "tcp+tls" (TLS records), "tcp+sealed" (sealed
// frames).
constexpr const char *lanes_name(TransportKind k, uint32_t lane_flags) noexcept {
  if (k != TransportKind::kTcp) return transport_name(k);
  if ((lane_flags & kLaneSealed) != 0) return "tcp+sealed";
  return (lane_flags & kLaneTls) != 0 ? "tcp+tls" : "tcp";
}

struct PoolResponse {  // kPoolResp
  Status status = Status::kSuccess;
  uint32_t nlanes = 0;
  uint16_t port = 0;
  TransportKind transport = TransportKind::kNone;
  PersistMethod method = PersistMethod::kGpspm;
  uint32_t pool_flags = 0;   // kPoolHasHeaders
  uint64_t remote_size = 0;  // net size of the remote pool
  Secret secret{};
  PoolAttr attr{};      // kOpen: the stored attributes
  Bytes provider_data;  // transport specific (verbs: rkey, address)
  // The lane security extension (minor 3), after provider_data: u32
  // lane_flags, u16 psk length, u16 reserved = 0, the psk. Sent only to a
  // client of minor >= 3 (`extended`); an older client's decoder takes no
  // trailing bytes.
  bool extended = false;
  uint32_t lane_flags = 0;  // kLaneTls, kLaneSealed
  // ssh mode: the TLS 1.3 external PSK of the lanes, or with kLaneSealed
  // their 32-byte master key; empty otherwise.
  Bytes lane_psk;
  // The token extension (minor 6), after the lane security extension: u16
  // length (0 or kTokenSize), u16 reserved = 0, the token: what a reopen
  // after a restart of the service proves. Sent only to a client of minor
  // >= 6 (`tokened`, which needs `extended`); length 0: no token (ssh mode).
  bool tokened = false;
  Bytes token;
  // The level extension (minor 7), after the token extension: u32 the
  // levels the target grants this session (level_bit() mask, always with
  // kPersistent). Sent only to a client of minor >= 7 (`leveled`, which
  // needs `tokened`); without it only kPersistent is granted.
  bool leveled = false;
  uint32_t levels = level_bit(Durability::kPersistent);
};

struct SetAttrRequest {
  PoolAttr attr{};
};

inline constexpr uint32_t kCloseRemove = 1;
struct CloseRequest {
  uint32_t flags = 0;
};

inline constexpr uint32_t kRemoveForce = 1;    // RPMEM_REMOVE_FORCE
inline constexpr uint32_t kRemovePoolSet = 2;  // RPMEM_REMOVE_POOL_SET
struct RemoveRequest {
  uint32_t flags = 0;
  std::string pool_set;
};

struct StatusResponse {  // kSetAttrResp, kCloseResp, kRemoveResp
  Status status = Status::kSuccess;
};

// --- Control channel ---------------------------------------------------------
// Each encode_* returns a whole frame (header + payload).
Bytes encode(const Hello &m);
Bytes encode(MsgType type, const PoolRequest &m);  // type: kCreate or kOpen
Bytes encode(const PoolResponse &m);
Bytes encode(const SetAttrRequest &m);
Bytes encode(const CloseRequest &m);
Bytes encode_keepalive();
Bytes encode(const RemoveRequest &m);
Bytes encode(MsgType type, const StatusResponse &m);  // kSetAttrResp, kCloseResp, kRemoveResp

// The header of a frame (exactly kFrameHeaderSize bytes); nullopt for an
// unknown type, a non-zero reserved field or a size above kMaxControlPayload.
std::optional<FrameHeader> decode_frame_header(std::span<const uint8_t> b);
// Payload decoders: exact sizes, bounded strings, known enum values.
std::optional<Hello> decode_hello(std::span<const uint8_t> payload);
std::optional<PoolRequest> decode_pool_request(std::span<const uint8_t> payload);
std::optional<PoolResponse> decode_pool_response(std::span<const uint8_t> payload);
std::optional<SetAttrRequest> decode_set_attr(std::span<const uint8_t> payload);
std::optional<CloseRequest> decode_close(std::span<const uint8_t> payload);
std::optional<RemoveRequest> decode_remove(std::span<const uint8_t> payload);
std::optional<StatusResponse> decode_status_response(std::span<const uint8_t> payload);

// --- Minor 10: a pool that ran ahead of its target, catching up ---------------
// proto_resync.cc. The client's report of its pool (kPoolState).
enum class PoolSync : uint32_t { kInSync = 0, kBehind = 1, kResyncing = 2 };
struct PoolStateReport {
  PoolSync state = PoolSync::kInSync;
  uint64_t bytes_left = 0;  // to send again
  uint64_t bytes_done = 0;  // sent again so far
  uint64_t behind_ms = 0;   // since the pool went behind (0 in sync)
};
// kChecksum: the pages [first, first + count) of each range, each
// kChecksumPage bytes of the pool (the last one up to the pool's end), at
// most kMaxChecksumPages in all; kChecksumResp: a status and one u64 a page
// (XXH3_64bits of its bytes), in order.
inline constexpr uint32_t kChecksumPage = 4096;
inline constexpr uint32_t kMaxChecksumPages = 8000;   // the answer within kMaxControlPayload
inline constexpr uint32_t kMaxChecksumRanges = 4000;  // the request within it
struct PageRange {
  uint64_t first = 0;
  uint32_t count = 0;
};
struct ChecksumRequest {
  std::vector<PageRange> ranges;
};
struct ChecksumResponse {
  Status status = Status::kSuccess;
  std::vector<uint64_t> sums;
};
Bytes encode(const PoolStateReport &m);
Bytes encode(const ChecksumRequest &m);
Bytes encode(const ChecksumResponse &m);
std::optional<PoolStateReport> decode_pool_state(std::span<const uint8_t> payload);
// nullopt also for no page, more than kMaxChecksumPages or more than
// kMaxChecksumRanges.
std::optional<ChecksumRequest> decode_checksum_request(std::span<const uint8_t> payload);
std::optional<ChecksumResponse> decode_checksum_response(std::span<const uint8_t> payload);

// PoolAttr on the wire: struct rpmem_pool_attr's layout, integers little-endian.
void encode_attr(const PoolAttr &a, uint8_t *out);
PoolAttr decode_attr(const uint8_t *in);

// --- Data lanes ----------------------------------------------------------------
// What both lane wires share (tcp lanes here, verbs lanes in verbs_wire.h).
//
// A request's first kRequestHeaderSize bytes: u8 op code, u8 flags, 6 bytes
// zero, u64 offset, u64 length. The op codes and flags are each wire's own.
inline constexpr size_t kRequestHeaderSize = 24;
struct RequestHeader {
  uint8_t op = 0;
  uint8_t flags = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};
inline void encode(const RequestHeader &h, uint8_t *out) noexcept {
  out[0] = h.op;
  out[1] = h.flags;
  wire::store_le(out + 2, 0, 6);
  wire::store_le(out + 8, h.offset, 8);
  wire::store_le(out + 16, h.length, 8);
}
// nullopt when a reserved byte is not zero.
inline std::optional<RequestHeader> decode_request_header(const uint8_t *in) noexcept {
  if (wire::load_le(in + 2, 6) != 0) return std::nullopt;
  return RequestHeader{in[0], in[1], wire::load_le(in + 8, 8), wire::load_le(in + 16, 8)};
}

// What a lane's first message proves, after its magic (and on tcp lanes its
// version): 32 bytes of proof of the session secret (transport/lane_proof.h:
// from minor 9 a nonce and a MAC, before it the secret itself), u32 lane,
// u32 lane count of the session. The u32 lane is u16 lane, u16 epoch.
inline constexpr size_t kLaneClaimSize = kSecretSize + 8;
struct LaneClaim {
  Secret proof{};
  uint32_t lane = 0;
  uint32_t nlanes = 0;
};
void encode(const LaneClaim &c, uint8_t *out);  // kLaneClaimSize bytes
LaneClaim decode_lane_claim(const uint8_t *in);

inline constexpr uint32_t kLaneMagic = 0x4c4d5052;  // "RPML"
inline constexpr size_t kLaneHelloSize = 48;
inline constexpr size_t kLaneHelloReplySize = 8;

// Lanes a session may have at most: a lane number fits in 16 bits, beside
// the epoch in the hello's u32 lane field.
inline constexpr uint32_t kMaxLaneNumber = 0xffff;

struct LaneHello {  // client -> target, first bytes of a data connection
  uint16_t major = kMajor;
  uint16_t minor = kMinor;
  Secret proof{};       // of the session secret (LaneClaim)
  uint32_t lane = 0;    // u16 on the wire, the low half of a u32
  uint16_t epoch = 0;   // the high half: 0 first, then one more each time it comes back
  uint32_t nlanes = 0;  // the final lane count of this session
};
void encode(const LaneHello &m, uint8_t (&out)[kLaneHelloSize]);
std::optional<LaneHello> decode_lane_hello(std::span<const uint8_t> b);
// The target's answer to a lane hello: u32 status (0: admitted, else an
// errno, EACCES), u32 zero.
void encode_lane_hello_reply(uint32_t status, uint8_t (&out)[kLaneHelloReplySize]);
uint32_t decode_lane_hello_reply(const uint8_t (&in)[kLaneHelloReplySize]);

// The tcp lanes' op codes (lane_op() and data_op() translate them).
enum class DataOp : uint8_t {
  kPersist = 1,      // payload; reply after it is durable
  kDeepPersist = 2,  // payload; reply after it reached the lowest domain
  kFlush = 3,        // payload; no reply
  kDrain = 4,        // reply once every earlier flush on this lane is durable
  kRead = 5,         // reply followed by `length` bytes
  // No payload, offset and length 0, an empty reply (minor 11). A client
  // that waits long for a reply sends one: the probe's bytes, and the
  // target's reply to it, come after whatever TCP lost at the tail of
  // either direction, so that each side's TCP sees the loss as a hole
  // (SACK) and sends it again within a round trip, instead of waiting for
  // its tail loss probe or retransmission timeout (200 ms at least, Linux's
  // TCP_RTO_MIN). Not a lane operation: never counted as one.
  kProbe = 6,
};
constexpr wire::LaneOp lane_op(DataOp op) noexcept {
  switch (op) {
    case DataOp::kPersist:
      return wire::LaneOp::kPersist;
    case DataOp::kDeepPersist:
      return wire::LaneOp::kDeepPersist;
    case DataOp::kFlush:
      return wire::LaneOp::kFlush;
    case DataOp::kDrain:
      return wire::LaneOp::kDrain;
    case DataOp::kRead:
    case DataOp::kProbe:  // not asked: a probe is no lane operation
      break;
  }
  return wire::LaneOp::kRead;
}
constexpr DataOp data_op(wire::LaneOp op) noexcept {
  switch (op) {
    case wire::LaneOp::kPersist:
      return DataOp::kPersist;
    case wire::LaneOp::kDeepPersist:
      return DataOp::kDeepPersist;
    case wire::LaneOp::kFlush:
      return DataOp::kFlush;
    case wire::LaneOp::kDrain:
      return DataOp::kDrain;
    case wire::LaneOp::kRead:
      break;
  }
  return DataOp::kRead;
}
inline constexpr uint8_t kDataRelaxed = 1;  // DataRequest::flags: no atomicity promise
// ... the reply may come once the bytes are visible (minor 7, on a session
// granted visible); without it, once they are persistent.
inline constexpr uint8_t kDataVisible = 2;

inline constexpr size_t kDataRequestSize = kRequestHeaderSize;
inline constexpr size_t kDataReplySize = 16;

struct DataRequest {
  DataOp op = DataOp::kPersist;
  uint8_t flags = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};
struct DataReply {
  uint32_t status = 0;  // 0 or a positive errno value (wire::is_errno)
  DataOp op = DataOp::kPersist;
  uint64_t length = 0;  // bytes that follow (kRead)
};

bool carries_payload(DataOp op);
void encode(const DataRequest &m, uint8_t (&out)[kDataRequestSize]);
std::optional<DataRequest> decode_data_request(std::span<const uint8_t> b);
void encode(const DataReply &m, uint8_t (&out)[kDataReplySize]);
std::optional<DataReply> decode_data_reply(std::span<const uint8_t> b);

}  // namespace rpmem::proto

#endif  // RPMEM_COMMON_PROTO_H
