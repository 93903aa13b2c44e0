// SPDX-License-Identifier: BSD-3-Clause
// The data-plane seam: what the pool logic on either side asks of a
// transport (tcp, verbs), and nothing about how bytes travel.
//
// Thread-safety: an InitiatorLane is used by one thread at a time; different
// lanes share nothing. shutdown() may be called from any thread.
#ifndef RPMEM_COMMON_TRANSPORT_TRANSPORT_H
#define RPMEM_COMMON_TRANSPORT_TRANSPORT_H

#include "common/error.h"
#include "common/proto.h"
#include "common/transport/flush_ranges.h"
#include "common/transport/lane_stats.h"
#include "common/transport/persister.h"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX
struct x509_st;     // OpenSSL's X509

namespace rpmem::transport {

using proto::DataOp;
using proto::TransportKind;

// InitiatorLane::write()'s and drain()'s flags.
inline constexpr unsigned kWriteRelaxed = 1;  // no atomicity promise (a relaxed persist or flush)
// Acknowledged once the bytes are visible on the target (proto::Durability):
// only on a session granted the visible level.
inline constexpr unsigned kWriteVisible = 2;

// Client side of one lane. Ranges were validated by the caller.
// Errors: ECONNRESET (connection lost, and not had again within the bound:
// the lane is dead), EPROTO (malformed reply: the lane is dead), EIO/EINVAL
// (the target failed this request; the lane is still usable). A lane that
// can come back (tcp, to a target of protocol minor 6; verbs, minor 8)
// rides out a broken or stalled connection: it connects again and sends
// again what was not acknowledged, within InitiatorParams::timeout of the
// last progress.
class InitiatorLane {
 public:
  virtual ~InitiatorLane() = default;
  // kPersist / kDeepPersist: returns when the target reports the range
  // durable (or with kWriteVisible, visible). kFlush: returns once the bytes
  // are handed to the transport. flags: kWriteRelaxed, kWriteVisible.
  virtual std::error_code write(DataOp op, uint64_t offset, uint64_t length,
                                unsigned flags) noexcept = 0;
  // Every earlier kFlush on this lane is durable (with kWriteVisible and no
  // flush that asked for more, visible) when this returns 0.
  virtual std::error_code drain(unsigned flags) noexcept = 0;
  std::error_code drain() noexcept { return drain(0); }
  virtual std::error_code read(void *dst, uint64_t offset, uint64_t length) noexcept = 0;
  // Fails any call in progress and every later one with ECONNRESET.
  virtual void shutdown() noexcept = 0;
  // The ranges of the pool this lane wrote or posted and the target has
  // not acknowledged durable (or visible, as asked) yet: its flushes since
  // its last drain. A call that failed adds nothing to them: its own range
  // is its caller's to know. What a lane that comes back writes again.
  // Between calls, from the thread that makes them.
  virtual std::vector<PoolRange> unacknowledged() const = 0;
  // Why the last call failed with ECONNRESET, in words for rpmem_errormsg()
  // ("no answer from the target for 20 s"); empty when the lane cannot
  // tell. From the thread that made the call.
  virtual std::string failure() const { return {}; }
};

// TLS on the tcp data lanes (tls_stream.h); no context: cleartext lanes.
struct LaneTls {
  // ssh mode: a context keyed by the session's pre-shared key; service
  // mode: one with the certificates of the control channel.
  std::shared_ptr<ssl_ctx_st> ctx;
  // Client: the name the target's certificate must carry (service mode;
  // empty: no certificate is checked, the PSK authenticates).
  std::string server_name;
  // Target: the certificate every lane must present, the control channel's
  // client's (service mode; null: no certificate is asked for).
  std::shared_ptr<x509_st> peer_cert;
  explicit operator bool() const noexcept { return ctx != nullptr; }
};

// Sealed tcp data lanes (tcp/sealed_stream.h): every message one AES-GCM
// frame under keys of each lane and direction made from `master`.
inline constexpr size_t kSealMasterSize = 32;
using SealMaster = std::array<uint8_t, kSealMasterSize>;
// When a lane's key moves to the next one: far below AES-GCM's limits for
// one key (2^32 frames of up to 2^16 bytes cover 2^36 blocks at most;
// these thresholds cap it at 2^32 blocks).
inline constexpr uint64_t kSealRotateFrames = uint64_t{1} << 32;
inline constexpr uint64_t kSealRotateBytes = uint64_t{64} << 30;

struct LaneSeal {
  bool on = false;
  SealMaster master{};
  // Each connection's keys take a nonce from each end (protocol minor 9 on
  // both sides; tcp/sealed_stream.h); without, the keys of a lane and epoch
  // are the same on every connection.
  bool nonces = false;
  // A key moves to the next one after this many frames or bytes (tests
  // make it sooner); both ends must agree.
  uint64_t rotate_frames = kSealRotateFrames;
  uint64_t rotate_bytes = kSealRotateBytes;
  explicit operator bool() const noexcept { return on; }
};

// Where a session's lanes connect: the data port, the session's secret,
// the sealed lanes' master (tcp) and the provider data (verbs: the pool's
// registration, the landing windows). A client that reopens its pool on a
// restarted service points it at the new session, and its lanes that
// connect again from then on go there. Thread-safe.
class LaneRoute {
 public:
  struct Where {
    uint16_t port = 0;
    proto::Secret secret{};
    SealMaster master{};
    proto::Bytes provider_data;
  };
  explicit LaneRoute(const Where &w) : where_(w) {}
  ~LaneRoute();
  Where get() const {
    std::lock_guard lock(mu_);
    return where_;
  }
  void set(const Where &w) {
    std::lock_guard lock(mu_);
    where_ = w;
  }

 private:
  mutable std::mutex mu_;
  Where where_;
};

struct InitiatorParams {
  std::string host;  // as in the target string, brackets stripped
  uint16_t port = 0;
  proto::Secret secret{};
  unsigned nlanes = 0;
  const uint8_t *local_base = nullptr;  // the local pool (pool_addr)
  size_t pool_size = 0;
  // Bound on every stall: a lane that moves no byte for this long, its
  // attempts to connect again included, fails.
  std::chrono::milliseconds timeout{5000};
  // The target takes lanes that come back (protocol minor 6 for tcp, 8 for
  // verbs): a broken or stalled lane connects again instead of failing.
  bool comeback = false;
  // The target takes claims that prove the secret with a MAC (protocol
  // minor 9, lane_proof.h); else a lane's claim shows the secret.
  bool proofs = false;
  // tcp: the target answers probes (protocol minor 11): a lane whose reply
  // is late sends one (tcp/reply_probe.h).
  bool probes = false;
  proto::Bytes provider_data;
  unsigned work_queue_size = 50;  // RPMEM_WORK_QUEUE_SIZE: writes posted before one must complete
  LaneTls tls;                    // tcp: lanes inside TLS
  LaneSeal seal;                  // tcp: sealed lanes (instead of tls)
  // Where lanes that connect again go (port, secret; tcp: seal.master,
  // verbs: provider_data, from it rather than from here); null: always here.
  std::shared_ptr<LaneRoute> route;
};

// Whether a `kind` lane to a daemon of protocol minor `daemon_minor` comes
// back when its connection breaks or stalls (tcp from minor 6, verbs from
// minor 8); else a lane that breaks is lost.
constexpr bool lanes_come_back(TransportKind kind, uint16_t daemon_minor) noexcept {
  return daemon_minor >=
         (kind == TransportKind::kVerbs ? proto::kMinorVerbsResume : proto::kMinorResume);
}

// Connects params.nlanes lanes; each proves the session secret.
Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(TransportKind kind,
                                                                  const InitiatorParams &params);

// Target side: the pool a transport writes into, and the persister of its
// medium, which makes it durable (persister.h). The range is what the
// client asked for; the pool may be larger.
class TargetPool {
 public:
  TargetPool(uint8_t *base, size_t size, size_t writable_from, Persister &persister) noexcept
      : base_(base), size_(size), writable_from_(writable_from), persister_(&persister) {}
  uint8_t *base() const noexcept { return base_; }
  size_t size() const noexcept { return size_; }  // bytes addressable by the client
  // Lowest offset the client may write (4096 when the pool has headers).
  size_t writable_from() const noexcept { return writable_from_; }
  const MediumTraits &traits() const noexcept { return persister_->traits(); }
  // The session granted the visible level (proto::kDataVisible): a request
  // that asks for it is acknowledged once visible; without the grant, once
  // persistent. Set before the target starts.
  void grant_visible(bool on) noexcept { visible_ = on; }
  bool visible(bool asked) const noexcept { return asked && visible_; }
  // The persister's calls (persister.h), on ranges the caller checked.
  std::error_code persist(size_t offset, size_t length, bool deep) const noexcept {
    return persister_->persist(offset, length, deep);
  }
  std::error_code write_durable(size_t offset, const uint8_t *src, size_t length,
                                bool deep = false) const noexcept {
    return persister_->write_durable(offset, src, length, deep);
  }
  std::error_code write_posted(size_t offset, const uint8_t *src, size_t length) const noexcept {
    return persister_->write_posted(offset, src, length);
  }
  // The visible level's (persister.h).
  std::error_code write_visible(size_t offset, const uint8_t *src, size_t length) const noexcept {
    return persister_->write_visible(offset, src, length);
  }
  std::error_code made_visible(size_t offset, size_t length) const noexcept {
    return persister_->made_visible(offset, length);
  }
  std::error_code persist_visible() const noexcept { return persister_->persist_visible(); }

  // Why a client's request for [offset, offset + length) is refused, or
  // nullptr: "range outside the pool", or for a write (`writes`) of at
  // least one byte, "write into the pool header".
  const char *refusal(uint64_t offset, uint64_t length, bool writes) const noexcept;

 private:
  uint8_t *base_;
  size_t size_;
  size_t writable_from_;
  Persister *persister_;
  bool visible_ = false;
};

struct TargetParams {
  std::string listen_address;  // numeric address; empty = any
  proto::Secret secret{};
  unsigned max_lanes = 0;  // granted to the client
  std::chrono::milliseconds hello_timeout{5000};
  // Numeric address data connections must come from (the session's control
  // peer); empty: any. Others are closed before anything is allocated.
  std::string peer_address;
  // Bound on noticing a vanished client on a data connection (keepalive,
  // TCP_USER_TIMEOUT); 0: the system's defaults.
  std::chrono::milliseconds peer_timeout{0};
  // Threads serving the lanes (tcp); 0: one per lane, at most one per CPU.
  unsigned nthreads = 0;
  // verbs, pools the NIC cannot write into (the page cache, fsdax): bytes
  // of each lane's registered landing window (rpmemd's verbs-window).
  size_t verbs_window = size_t{1} << 20;
  // verbs: the windows for every pool, even one the NIC could write into.
  bool verbs_windows_always = false;
  // kApm only when the daemon runs with --persist-apm and the pool is pmem:
  // verbs persists by RDMA READ, tcp makes every write durable as it lands.
  proto::PersistMethod persist_method = proto::PersistMethod::kGpspm;
  // The protocol minor of the client's pool request (what it can decode).
  uint16_t client_minor = 0;
  // tcp: every lane completes a TLS handshake before its lane hello, which
  // then comes inside TLS; a connection that does not is refused.
  LaneTls tls;
  // tcp: every lane's bytes are sealed frames (instead of tls); its hello
  // is the first one.
  LaneSeal seal;
  // Called once, from a transport thread, when a lane sees malformed input:
  // the session should end.
  std::function<void(const std::string &why)> on_fatal;
  // Where the lanes count what they serve (lane_stats.h), one per lane
  // granted; null: they count nothing.
  std::shared_ptr<TargetCounters> counters;
};

// A listening target: serves lanes on threads of its own until stop().
class Target {
 public:
  virtual ~Target() = default;
  virtual uint16_t port() const noexcept = 0;
  virtual proto::Bytes provider_data() const = 0;
  // Starts accepting lanes. Strangers (no or wrong secret) are logged and
  // dropped without disturbing the session.
  virtual void start() = 0;
  // Closes every connection and joins every thread. Idempotent.
  virtual void stop() noexcept = 0;
  // The daemon itself rewrote [offset, +length) of the pool (its header):
  // what clients read from now on must be the new bytes.
  virtual void pool_changed(size_t /*offset*/, size_t /*length*/) noexcept {}
  // The method the lanes are served with (GPSPM where APM was asked for but
  // cannot be had: the verbs bounded path).
  virtual proto::PersistMethod persist_method() const noexcept = 0;
  // Where the transport's writes land and why, for the daemon's log (empty:
  // nothing to say beyond the method).
  virtual std::string data_path() const { return {}; }
};

// Throws SetupError when it cannot listen.
std::unique_ptr<Target> make_target(TransportKind kind, TargetPool &pool,
                                    const TargetParams &params);

// The transports this build and machine can serve or use.
uint32_t available_transports();

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_TRANSPORT_H
