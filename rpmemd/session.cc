// SPDX-License-Identifier: BSD-3-Clause
// One client session of rpmemd.
#include "rpmemd/session.h"

#include "common/log.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/tls_stream.h"
#include "rpmemd/session_tokens.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace rpmemd {

using rpmem::errc;
using rpmem::proto::MsgType;
using rpmem::proto::Status;

namespace {

constexpr unsigned kMaxLanes = 1024;
// What one data lane message carries inline (the verbs provider's kMaxInline).
constexpr unsigned kLaneInlineCapacity = 32768;

// The process's descriptor budget, shared by every session: a session
// keeps kSessionFds for itself (control, data listener, lane servers, pool
// files), and the lanes granted to all sessions together must fit in what
// RLIMIT_NOFILE leaves after that. A tcp lane takes one descriptor, a verbs
// lane two (its queue pair's event channel too).
constexpr long kBaseFds = 48;  // with one session: 64, as always
constexpr long kSessionFds = 16;
std::atomic<long> g_sessions{0};
std::atomic<long> g_lane_fds{0};  // granted to live sessions

// Lanes that fit in the budget now, at most kMaxLanes.
unsigned lanes_fd_budget(unsigned fds_per_lane) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kMaxLanes;
  const long left = static_cast<long>(rl.rlim_cur) - kBaseFds - kSessionFds * g_sessions.load() -
                    g_lane_fds.load();
  const long budget = left / static_cast<long>(fds_per_lane);
  return budget < 1 ? 0 : static_cast<unsigned>(std::min<long>(budget, kMaxLanes));
}

std::atomic<uint64_t> g_reopened{0};

bool random_secret(proto::Secret &s) {
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = ::getrandom(s.data() + got, s.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

const char *kGpspmName = "General Purpose Server Persistency Method";
const char *kApmName = "Appliance Persistency Method";

// The transports in bit mask `t`, by name: "verbs", "tcp", "verbs, tcp".
std::string provider_names(uint32_t t) {
  const uint32_t tcp = proto::transport_bit(proto::TransportKind::kTcp);
  const uint32_t verbs = proto::transport_bit(proto::TransportKind::kVerbs);
  std::string out;
  if (t & verbs) out = "verbs";
  if (t & tcp) out += out.empty() ? "tcp" : ", tcp";
  return out.empty() ? "(none)" : out;
}

// A UUID as PMDK printed it: the first three fields read in host byte order.
std::string uuid_str(const std::array<uint8_t, 16> &u) {
  uint32_t time_low;
  uint16_t time_mid, time_hi;
  std::memcpy(&time_low, &u[0], 4);
  std::memcpy(&time_mid, &u[4], 2);
  std::memcpy(&time_hi, &u[6], 2);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", time_low,
                time_mid, time_hi, u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return buf;
}

// The lines under "pool attributes:"; nullptr (no headers) is "NULL".
void log_pool_attr(const rpmem::PoolAttr *attr) {
  if (!attr) {
    RPMEM_LOG_INFO("\tNULL");
    return;
  }
  const auto &sig = attr->signature;
  RPMEM_LOG_INFO("\tsignature: '%.*s'", static_cast<int>(strnlen(sig.data(), sig.size())),
                 sig.data());
  RPMEM_LOG_INFO("\tmajor: %u", attr->major);
  RPMEM_LOG_INFO("\tcompat_features: 0x%x", attr->compat_features);
  RPMEM_LOG_INFO("\tincompat_features: 0x%x", attr->incompat_features);
  RPMEM_LOG_INFO("\tro_compat_features: 0x%x", attr->ro_compat_features);
  RPMEM_LOG_INFO("\tpoolset_uuid: %s", uuid_str(attr->poolset_uuid).c_str());
  RPMEM_LOG_INFO("\tuuid: %s", uuid_str(attr->uuid).c_str());
  RPMEM_LOG_INFO("\tnext_uuid: %s", uuid_str(attr->next_uuid).c_str());
  RPMEM_LOG_INFO("\tprev_uuid: %s", uuid_str(attr->prev_uuid).c_str());
}

}  // namespace

SessionParams session_params(const Config &config) {
  SessionParams p;
  p.transports = rpmem::transport::available_transports();
  p.persist_apm = config.persist_apm;
  p.nthreads = config.nthreads;
  p.max_lanes = config.max_lanes;
  p.verbs_window = config.verbs_window;
  p.verbs_windows_always = config.verbs_windows_always;
  p.peer_timeout = config.peer_timeout;
  p.data_tls = config.data_tls;
  p.data_seal = config.data_seal;
  return p;
}

Session::Session(PoolStore &store, ControlStream &io, SessionParams params, int signal_fd)
    : store_(store), io_(io), params_(std::move(params)), signal_fd_(signal_fd) {
  g_sessions.fetch_add(1);
  fatal_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (signal_fd_ >= 0) io_.add_wake_fd(signal_fd_);
  if (fatal_fd_ >= 0) io_.add_wake_fd(fatal_fd_);
  if (params_.peer_timeout.count() > 0) {
    idle_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (idle_fd_ >= 0) io_.add_wake_fd(idle_fd_);
  }
}

// The client's keepalives must keep coming: the session ends when the
// control channel has been silent for peer_timeout.
void Session::arm_idle_timer() noexcept {
  if (idle_fd_ < 0) return;
  const auto ms = params_.peer_timeout.count();
  itimerspec its{};
  its.it_value.tv_sec = static_cast<time_t>(ms / 1000);
  its.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1000000;
  ::timerfd_settime(idle_fd_, 0, &its, nullptr);
}

Session::~Session() {
  release(false);
  g_sessions.fetch_sub(1);
  if (fatal_fd_ >= 0) ::close(fatal_fd_);
  if (idle_fd_ >= 0) ::close(idle_fd_);
}

void Session::release(bool remove) noexcept {
  if (target_) target_->stop();
  if (target_ && params_.status) params_.status->pool_closed();
  target_.reset();
  g_lane_fds.fetch_sub(lane_fds_);
  lane_fds_ = 0;
  if (params_.client_lanes) params_.client_lanes->fetch_sub(client_lanes_);
  client_lanes_ = 0;
  view_.reset();
  if (!pool_) return;
  // Logged in PMDK's order: closing, closed, removing, removed (the parts
  // are unlinked before the pool is unlocked).
  RPMEM_LOG_NOTICE("closing pool");
  std::error_code removed;
  if (remove) removed = pool_->remove_parts();
  pool_.reset();  // durable, unmapped, unlocked
  RPMEM_LOG_INFO("pool closed");
  if (remove) {
    RPMEM_LOG_NOTICE("removing '%s'", pool_set_.c_str());
    if (removed)
      RPMEM_LOG_ERR("removing pool '%s' failed: %s", pool_set_.c_str(), removed.message().c_str());
    else
      RPMEM_LOG_INFO("removed '%s'", pool_set_.c_str());
  }
}

void Session::log_policy(proto::TransportKind kind) const {
  RPMEM_LOG_NOTICE("persistency policy:");
  if (apm_) {
    RPMEM_LOG_NOTICE("\tpersist method: %s", kApmName);
    RPMEM_LOG_NOTICE("\tpersist flush: none");
  } else {
    RPMEM_LOG_NOTICE("\tpersist method: %s", kGpspmName);
    RPMEM_LOG_NOTICE("\tpersist flush: %s", view_->traits().flush);
  }
  RPMEM_LOG_NOTICE("\tmedium: %s", view_->traits().description);
  // APM over tcp: no RDMA READ to wait for; the daemon flushes as it copies.
  if (apm_ && kind == proto::TransportKind::kTcp)
    RPMEM_LOG_NOTICE(
        "\tAPM over tcp: each write is flushed into the pool as it lands "
        "(pmem_persist), before the reply");
  // The medium decides where a NIC may write (verbs_target.h).
  if (kind == proto::TransportKind::kVerbs)
    RPMEM_LOG_NOTICE("\tRDMA writes: %s", target_->data_path().c_str());
}

Status Session::open_or_create(MsgType type, const proto::PoolRequest &req,
                               proto::PoolResponse &resp) {
  const bool create = type == MsgType::kCreate;
  if (pool_) {  // one pool per session
    RPMEM_LOG_ERR("pool already opened");
    return Status::kFatal;
  }
  if (req.major != proto::kMajor) {
    RPMEM_LOG_ERR("unsupported protocol version -- %u.%u", req.major, req.minor);
    return Status::kBadProto;
  }
  if (req.nlanes == 0) {
    RPMEM_LOG_ERR("invalid number of lanes -- %u", req.nlanes);
    return Status::kBadNlanes;
  }
  // TLS data lanes: a client of protocol 1.3 or later reads the answer in
  // the response's extension; an older one gets none and cannot have them.
  const bool capable = req.minor >= proto::kMinorLaneTls;
  const bool asks = (req.lane_flags & proto::kLaneTls) != 0;
  resp.extended = capable;
  bool tls = false;
  switch (params_.data_tls) {
    case DataTls::kNo:
      if (asks) {
        RPMEM_LOG_ERR("the client asks for TLS data lanes: this daemon has none (data-tls = no)");
        return Status::kProvNoSup;
      }
      break;
    case DataTls::kAllow:
      tls = asks;
      break;
    case DataTls::kYes:
      tls = capable;
      break;
    case DataTls::kRequire:
      if (!capable) {
        RPMEM_LOG_ERR(
            "data-tls = require: the client (protocol %u.%u) cannot run its data lanes inside TLS",
            req.major, req.minor);
        return Status::kProvNoSup;
      }
      tls = true;
      break;
  }
  const uint32_t tcp = proto::transport_bit(proto::TransportKind::kTcp);
  const uint32_t verbs = proto::transport_bit(proto::TransportKind::kVerbs);
  // TLS lanes are tcp lanes.
  const uint32_t offered = req.transports & params_.transports & (tls ? tcp : ~0u);
  if (tls && (offered & tcp) == 0) {
    RPMEM_LOG_ERR("TLS data lanes need tcp: provider not supported -- %s",
                  provider_names(req.transports & params_.transports).c_str());
    return Status::kProvNoSup;
  }
  if ((offered & (tcp | verbs)) == 0) {
    RPMEM_LOG_ERR("provider not supported -- %s (this daemon offers %s)",
                  provider_names(req.transports).c_str(),
                  provider_names(params_.transports).c_str());
    return Status::kProvNoSup;
  }

  rpmem::PoolAttr attr = req.attr;
  std::error_code ec;
  if (create) {
    ec = store_.create(req.pool_set, attr.is_zero() ? nullptr : &attr, pool_);
  } else {
    ec = store_.open(req.pool_set, pool_, attr);
  }
  if (ec) {
    // A name outside the directory was logged when it was refused.
    if (ec.value() != kBadName)
      RPMEM_LOG_ERR("cannot %s pool set -- '%s/%s': %s", create ? "create" : "open",
                    store_.dir().c_str(), req.pool_set.c_str(), ec.message().c_str());
    return proto::errno_to_status(ec.value());
  }
  created_ = create;
  pool_set_ = req.pool_set;
  if (!create) {
    RPMEM_LOG_NOTICE("pool attributes:");
    log_pool_attr(&attr);
  }
  auto undo = [&](Status s) {
    release(create);
    return s;
  };
  // A reopen after a restart of the service: only by the session the pool
  // was last opened by (its token), never over another's writes.
  std::string poolset_path;
  if (params_.session_tokens) store_.path_of(req.pool_set, poolset_path);
  if (req.reopen && !create) {
    if (poolset_path.empty() || !session_tokens::matches(poolset_path, req.token)) {
      RPMEM_LOG_ERR("cannot reopen pool set '%s' for the session before the restart: %s",
                    req.pool_set.c_str(),
                    poolset_path.empty() ? "this daemon keeps no session tokens"
                                         : "another session has opened it since");
      return undo(Status::kStale);
    }
    RPMEM_LOG_NOTICE("pool set '%s' reopened by its session of before the restart",
                     req.pool_set.c_str());
    g_reopened.fetch_add(1, std::memory_order_relaxed);
  }
  if (pool_->size() < rpmem::kMinPool) {
    RPMEM_LOG_ERR("invalid pool size -- must be >= %zu", rpmem::kMinPool);
    return undo(Status::kPoolCfg);
  }
  if (pool_->size() < req.pool_size) {
    RPMEM_LOG_ERR("requested size is too big");
    return undo(Status::kBadSize);
  }
  // The grant: what the client asks, at most max-lanes (lanes beyond the
  // threads that serve them only cost descriptors and memory), and what the
  // descriptor limit leaves room for.
  unsigned nlanes = std::min({req.nlanes, std::min(params_.max_lanes, kMaxLanes),
                              lanes_fd_budget((offered & verbs) ? 2 : 1)});
  if (nlanes == 0) {
    RPMEM_LOG_ERR("no file descriptors left for lanes (RLIMIT_NOFILE, shared by all sessions)");
    return undo(Status::kBadNlanes);
  }
  if (params_.client_lanes) {  // what this client's other sessions left, taken at once
    long used = params_.client_lanes->load();
    long take = 0;
    do {
      take = std::clamp<long>(static_cast<long>(params_.max_client_lanes) - used, 0, nlanes);
    } while (take > 0 && !params_.client_lanes->compare_exchange_weak(used, used + take));
    nlanes = static_cast<unsigned>(take);
    if (nlanes == 0) {
      RPMEM_LOG_ERR(
          "no lanes left for this client (max-lanes-per-client %u, in use by its "
          "other sessions)",
          params_.max_client_lanes);
      return undo(Status::kBadNlanes);
    }
    client_lanes_ = nlanes;
  }
  lane_fds_ = static_cast<long>(nlanes) * ((offered & verbs) ? 2 : 1);
  g_lane_fds.fetch_add(lane_fds_);
  if (!random_secret(resp.secret)) {
    RPMEM_LOG_ERR("cannot generate the session secret: %s", std::strerror(errno));
    return undo(Status::kFatal);
  }

  view_ = std::make_unique<rpmem::transport::TargetPool>(
      pool_->base(), req.pool_size, pool_->has_headers() ? rpmem::kPoolHdrSize : 0,
      pool_->persister());
  rpmem::transport::TargetParams tp;
  tp.listen_address = params_.listen_address;
  tp.secret = resp.secret;
  tp.max_lanes = nlanes;
  tp.nthreads = params_.nthreads;
  tp.verbs_window = params_.verbs_window;
  tp.verbs_windows_always = params_.verbs_windows_always;
  tp.peer_address = params_.peer_address;
  tp.peer_timeout = params_.peer_timeout;
  tp.client_minor = req.minor;
  if (params_.status) tp.counters = std::make_shared<rpmem::transport::TargetCounters>(nlanes);
  // Sealed rather than TLS: when the client can seal and this daemon lets it.
  const bool sealed = tls && params_.data_seal && req.minor >= proto::kMinorSealed &&
                      (req.lane_flags & proto::kLaneSealed) != 0;
  if (sealed) {
    tp.seal.on = true;
    bool keyed = false;
    if (params_.export_keying_material) {  // bound to the control channel's TLS session
      keyed = params_.export_keying_material(tp.seal.master.data(), tp.seal.master.size(),
                                             rpmem::transport::tcp::kSealExporterLabel,
                                             resp.secret.data(), resp.secret.size());
    } else {  // ssh mode: a key of this session's, handed over the ssh channel
      proto::Secret master;
      keyed = random_secret(master);
      std::copy(master.begin(), master.end(), tp.seal.master.begin());
      resp.lane_psk.assign(master.begin(), master.end());
    }
    if (!keyed) {
      RPMEM_LOG_ERR("cannot key the sealed data lanes");
      return undo(Status::kFatal);
    }
  } else if (tls && params_.cert_lanes) {
    tp.tls = params_.cert_lanes;  // the control channel's certificates
  } else if (tls) {
    // ssh mode: a key of this session's, handed over the ssh channel.
    proto::Secret psk;
    std::string why;
    if (random_secret(psk)) tp.tls.ctx = rpmem::transport::tcp::make_psk_context(true, psk, why);
    if (!tp.tls.ctx) {
      RPMEM_LOG_ERR("cannot key the TLS data lanes: %s",
                    why.empty() ? std::strerror(errno) : why.c_str());
      return undo(Status::kFatal);
    }
    resp.lane_psk.assign(psk.begin(), psk.end());
  }
  resp.lane_flags = sealed ? proto::kLaneTls | proto::kLaneSealed : tls ? proto::kLaneTls : 0;
  const int fatal_fd = fatal_fd_;
  tp.on_fatal = [fatal_fd](const std::string &) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fatal_fd, &one, sizeof(one));
  };
  // verbs when both sides allow it and it can serve here (a device, an RDMA
  // address), else tcp. APM with --persist-apm on pmem: over verbs by RDMA
  // READ (where the pool is registered), over tcp each write is made durable
  // as it lands.
  proto::TransportKind kind = proto::TransportKind::kTcp;
  tp.persist_method = params_.persist_apm && view_->traits().apm_sound
                          ? proto::PersistMethod::kApm
                          : proto::PersistMethod::kGpspm;
  if (offered & verbs) {
    try {
      target_ = params_.make_target(proto::TransportKind::kVerbs, *view_, tp);
      kind = proto::TransportKind::kVerbs;
    } catch (const std::system_error &e) {
      // No device or RDMA address here, or a client too old for this pool.
      const bool unusable = e.code().value() == EADDRNOTAVAIL || e.code().value() == ENODEV ||
                            e.code().value() == EPROTONOSUPPORT;
      if (!(offered & tcp) || !unusable) {
        RPMEM_LOG_ERR("%s", e.what());
        return undo(unusable ? Status::kProvNoSup : Status::kFatalConn);
      }
      RPMEM_LOG_NOTICE("%s: using tcp", e.what());
    }
  }
  if (!target_) {
    try {
      target_ = params_.make_target(proto::TransportKind::kTcp, *view_, tp);
    } catch (const std::exception &e) {
      RPMEM_LOG_ERR("%s", e.what());
      return undo(Status::kFatalConn);
    }
  }
  apm_ = target_->persist_method() == proto::PersistMethod::kApm;
  // Before the answer: a target that cannot serve (no thread to start)
  // fails the request, rather than the lanes of a client told all is well.
  // The client's lanes cannot come before it has the port and the secret.
  try {
    target_->start();
  } catch (const std::exception &e) {
    RPMEM_LOG_ERR("cannot start the data listener: %s", e.what());
    return undo(Status::kFatalConn);
  }
  log_policy(kind);
  if (params_.status) {
    PoolInfo info;
    info.pool_set = req.pool_set;
    info.lanes_asked = req.nlanes;
    info.lanes_granted = nlanes;
    info.transport = kind == proto::TransportKind::kVerbs ? "verbs" : tls ? "tcp+tls" : "tcp";
    info.medium = view_->traits().name;
    info.method = apm_ ? "APM" : "GPSPM";
    params_.status->pool_opened(info, tp.counters);
  }
  resp.nlanes = nlanes;
  resp.port = target_->port();
  resp.transport = kind;
  resp.method = target_->persist_method();
  resp.pool_flags = pool_->has_headers() ? proto::kPoolHasHeaders : 0;
  resp.remote_size = pool_->size();
  resp.attr = create ? rpmem::PoolAttr{} : attr;
  resp.provider_data = target_->provider_data();
  // The pool's new session token, for a client that can reopen with it.
  // Without one (a client that cannot take it, a token that cannot be
  // written) this session has the pool all the same: no earlier session may
  // reopen it then.
  if (!poolset_path.empty()) {
    resp.tokened = req.minor >= proto::kMinorResume;
    proto::SessionToken token{};
    const std::error_code tec =
        resp.tokened ? session_tokens::issue(poolset_path, token) : std::error_code{};
    if (resp.tokened && !tec) {
      resp.token.assign(token.begin(), token.end());
      token_path_ = poolset_path;
    } else {
      session_tokens::forget(poolset_path);
      if (tec)
        RPMEM_LOG_WARN(
            "no session token for '%s' (%s): its client cannot reopen it after a restart",
            req.pool_set.c_str(), tec.message().c_str());
    }
  }
  // As PMDK's response block; the session secret takes the place of the
  // rkey and is not logged.
  RPMEM_LOG_NOTICE("%s request response: (status = 0)", create ? "create" : "open");
  RPMEM_LOG_NOTICE("\tport: %u", resp.port);
  RPMEM_LOG_NOTICE("\tprovider: %s", kind == proto::TransportKind::kVerbs ? "verbs" : "tcp");
  RPMEM_LOG_NOTICE("\tpool size: %zu", pool_->size());
  RPMEM_LOG_NOTICE("\tnlanes: %u", nlanes);
  RPMEM_LOG_NOTICE("\tpersist method: %s", apm_ ? kApmName : kGpspmName);
  // Cleartext lanes log as PMDK did: no line.
  if (sealed)
    RPMEM_LOG_NOTICE("\tdata lanes: sealed, AES-128-GCM (%s)",
                     params_.export_keying_material ? "keys from the control channel's TLS session"
                                                    : "a key of the session, over ssh");
  else if (tls)
    RPMEM_LOG_NOTICE("\tdata lanes: TLS (%s)", params_.cert_lanes
                                                   ? "the control channel's certificates"
                                                   : "a pre-shared key of the session");
  return Status::kSuccess;
}

std::error_code Session::handle_pool_request(MsgType type, const proto::Bytes &payload,
                                             SessionEnd &end) {
  const bool create = type == MsgType::kCreate;
  auto req = proto::decode_pool_request(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed %s request", create ? "create" : "open");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("%s request:", create ? "create" : "open");
  RPMEM_LOG_NOTICE("\tpool descriptor: '%s'", req->pool_set.c_str());
  RPMEM_LOG_NOTICE("\tpool size: %llu", static_cast<unsigned long long>(req->pool_size));
  RPMEM_LOG_NOTICE("\tnlanes: %u", req->nlanes);
  RPMEM_LOG_NOTICE("\tprovider: %s", provider_names(req->transports).c_str());
  // PMDK's request carried the inline capacity of a lane (8192); ours is
  // fixed by the protocol: what one lane message carries inline.
  RPMEM_LOG_NOTICE("\tbuff_size: %u", kLaneInlineCapacity);
  if (create) {
    RPMEM_LOG_NOTICE("pool attributes:");
    log_pool_attr(req->attr.is_zero() ? nullptr : &req->attr);
  }
  proto::PoolResponse resp;
  resp.status = open_or_create(type, *req, resp);
  if (resp.status != Status::kSuccess) resp.lane_psk.clear();
  // PMDK logged the response block only for a request that succeeded.
  if (resp.status != Status::kSuccess)
    RPMEM_LOG_DEBUG("%s request response: (status = %u)", create ? "create" : "open",
                    static_cast<unsigned>(resp.status));
  // Before the response: once it is sent, the lanes may come (and be
  // logged by the data listener) before this thread logs anything more.
  if (resp.status == Status::kSuccess) RPMEM_LOG_INFO("waiting for in-band connection");
  if (auto ec = io_.write_all(proto::encode(resp))) return ec;
  if (resp.status != Status::kSuccess) {
    end = SessionEnd::kRequestFailed;
    return {};
  }
  return {};
}

std::error_code Session::handle_set_attr(const proto::Bytes &payload) {
  auto req = proto::decode_set_attr(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed set_attr request");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("set attributes request");
  Status status = Status::kFatal;
  if (pool_) {
    const rpmem::PoolAttr *attr = req->attr.is_zero() ? nullptr : &req->attr;
    auto ec = pool_->set_attr(attr);
    if (ec) {
      RPMEM_LOG_ERR("cannot set pool attributes -- '%s': %s", pool_set_.c_str(),
                    ec.message().c_str());
    } else {
      RPMEM_LOG_NOTICE("new pool attributes:");
      log_pool_attr(attr);
      if (target_ && pool_->has_headers()) target_->pool_changed(0, rpmem::kPoolHdrSize);
    }
    status = proto::errno_to_status(ec.value());
  } else {
    RPMEM_LOG_ERR("pool not opened");
  }
  return io_.write_all(proto::encode(MsgType::kSetAttrResp, proto::StatusResponse{status}));
}

std::error_code Session::handle_close(const proto::Bytes &payload) {
  auto req = proto::decode_close(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed close request");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("close request");
  Status status = Status::kSuccess;
  if (!token_path_.empty()) {  // closed by its client: nobody is to reopen it
    session_tokens::forget(token_path_);
    token_path_.clear();
  }
  if (pool_)
    release(created_ && (req->flags & proto::kCloseRemove));
  else {
    RPMEM_LOG_ERR("pool not opened");
    status = Status::kFatal;
  }
  RPMEM_LOG_NOTICE("close request response (status = %u)", static_cast<unsigned>(status));
  return io_.write_all(proto::encode(MsgType::kCloseResp, proto::StatusResponse{status}));
}

std::error_code Session::handle_remove(const proto::Bytes &payload) {
  auto req = proto::decode_remove(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed remove request");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("remove request");
  RPMEM_LOG_NOTICE("\tpool descriptor: '%s'", req->pool_set.c_str());
  Status status = Status::kFatal;
  if (pool_) {
    RPMEM_LOG_ERR("remove request in a session that has a pool open");
  } else {
    std::string poolset_path;
    if (params_.session_tokens && !store_.path_of(req->pool_set, poolset_path))
      session_tokens::forget(poolset_path);
    auto ec = store_.remove(req->pool_set, req->flags & proto::kRemoveForce,
                            req->flags & proto::kRemovePoolSet);
    if (ec)
      RPMEM_LOG_ERR("removing '%s' failed: %s", req->pool_set.c_str(), ec.message().c_str());
    else
      RPMEM_LOG_NOTICE("removed '%s'", req->pool_set.c_str());
    status = proto::errno_to_status(ec.value());
  }
  return io_.write_all(proto::encode(MsgType::kRemoveResp, proto::StatusResponse{status}));
}

SessionEnd Session::run() noexcept try {
  proto::Bytes payload;
  for (;;) {
    proto::FrameHeader hdr{};
    int woken = -1;
    std::error_code ec = io_.read_frame(hdr, payload, woken);
    if (ec == std::errc::interrupted) {
      if (woken == signal_fd_) {
        RPMEM_LOG_NOTICE("signal received: making the pool durable and exiting");
        release(false);
        return SessionEnd::kSignal;
      }
      if (woken == idle_fd_) {
        RPMEM_LOG_NOTICE("client silent for %lld ms (its keepalives stopped): ending the session",
                         static_cast<long long>(params_.peer_timeout.count()));
        release(false);
        return SessionEnd::kDisconnected;
      }
      RPMEM_LOG_ERR("a data lane failed: ending the session");
      release(false);
      return SessionEnd::kFatal;
    }
    if (ec == std::errc::connection_reset) {
      RPMEM_LOG_NOTICE("client disconnected");
      release(false);
      return SessionEnd::kDisconnected;
    }
    if (ec) {
      RPMEM_LOG_ERR("control channel: %s", ec.message().c_str());
      release(false);
      return SessionEnd::kFatal;
    }
    if (hdr.type == MsgType::kKeepalive && !keepalives_) {
      keepalives_ = true;
      RPMEM_LOG_DEBUG("the client sends keepalives: %lld ms of silence end the session",
                      static_cast<long long>(params_.peer_timeout.count()));
    }
    if (keepalives_) arm_idle_timer();
    SessionEnd end = SessionEnd::kClosed;
    bool done = false;
    switch (hdr.type) {
      case MsgType::kKeepalive:  // no reply
        if (hdr.size != 0) ec = errc(EPROTO);
        break;
      case MsgType::kCreate:
      case MsgType::kOpen:
        ec = handle_pool_request(hdr.type, payload, end);
        done = end == SessionEnd::kRequestFailed;
        break;
      case MsgType::kSetAttr:
        ec = handle_set_attr(payload);
        break;
      case MsgType::kClose:
        ec = handle_close(payload);
        done = true;
        break;
      case MsgType::kRemove:
        ec = handle_remove(payload);
        done = true;
        break;
      default:
        RPMEM_LOG_ERR("unexpected message type %u", static_cast<unsigned>(hdr.type));
        ec = errc(EPROTO);
    }
    if (ec) {
      RPMEM_LOG_ERR("control channel: %s", ec.message().c_str());
      release(false);
      return SessionEnd::kFatal;
    }
    if (done) return end;
  }
} catch (const std::exception &e) {
  RPMEM_LOG_ERR("session failed: %s", e.what());
  release(false);
  return SessionEnd::kFatal;
}

int termination_signal_fd() noexcept {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return ::signalfd(-1, &sigs, SFD_CLOEXEC);
}

uint64_t sessions_reopened() noexcept { return g_reopened.load(std::memory_order_relaxed); }

}  // namespace rpmemd
