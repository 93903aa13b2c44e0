// SPDX-License-Identifier: BSD-3-Clause
// Session::open_or_create and its steps: the request's checks, the pool, a
// reopen's token, the lane grant, the lanes' keys, the target, the answer.
#include "common/log.h"
#include "common/random.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/tls_stream.h"
#include "rpmemd/session.h"
#include "rpmemd/session_log.h"
#include "rpmemd/session_tokens.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace rpmemd {

using rpmem::proto::MsgType;
using rpmem::proto::Status;

namespace {

const uint32_t kTcp = proto::transport_bit(proto::TransportKind::kTcp);
const uint32_t kVerbs = proto::transport_bit(proto::TransportKind::kVerbs);

bool random_secret(proto::Secret &s) { return !rpmem::fill_random(s.data(), s.size()); }

}  // namespace

// What a request may have before the pool is touched: one pool a session,
// the major version, lanes, its lanes' security, a transport both offer.
Status Session::check_request(const proto::PoolRequest &req, LaneSecurity &security,
                              uint32_t &offered, proto::PoolResponse &resp) const {
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
  resp.extended = req.minor >= proto::kMinorLaneTls;
  security = choose_lane_security(params_.data_tls, params_.data_seal, req.minor, req.lane_flags);
  if (security.status != Status::kSuccess) {
    RPMEM_LOG_ERR("%s", security.why.c_str());
    return security.status;
  }
  // TLS lanes are tcp lanes.
  offered = req.transports & params_.transports & (security.tls ? kTcp : ~0u);
  if (security.tls && (offered & kTcp) == 0) {
    RPMEM_LOG_ERR("TLS data lanes need tcp: provider not supported -- %s",
                  provider_names(req.transports & params_.transports).c_str());
    return Status::kProvNoSup;
  }
  if ((offered & (kTcp | kVerbs)) == 0) {
    RPMEM_LOG_ERR("provider not supported -- %s (this daemon offers %s)",
                  provider_names(req.transports).c_str(),
                  provider_names(params_.transports).c_str());
    return Status::kProvNoSup;
  }
  return Status::kSuccess;
}

Status Session::open_pool(bool create, const proto::PoolRequest &req, rpmem::PoolAttr &attr) {
  std::error_code ec = create ? store_.create(req.pool_set, attr.is_zero() ? nullptr : &attr, pool_)
                              : store_.open(req.pool_set, pool_, attr);
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
  return Status::kSuccess;
}

// The pool just opened: a reopen after a restart of the service only by the
// session the pool was last opened by (its token), never over another's
// writes; its size. poolset_path: where the pool's token lives (empty: this
// daemon keeps no tokens).
Status Session::check_pool(bool create, const proto::PoolRequest &req, std::string &poolset_path) {
  store_.path_of(req.pool_set, poolset_path);
  if (req.reopen && !create) {
    const session_tokens::Verdict v =
        poolset_path.empty() ? session_tokens::Verdict::kStale
                             : session_tokens::check(poolset_path, req.token, pool_->part_ids());
    if (v != session_tokens::Verdict::kMatches) {
      RPMEM_LOG_ERR("cannot reopen pool set '%s' for the session before the restart: %s",
                    req.pool_set.c_str(),
                    poolset_path.empty() ? "this daemon keeps no session tokens"
                    : v == session_tokens::Verdict::kReplaced
                        ? "its part files were replaced since (removed and made again)"
                        : "another session has opened it since");
      return Status::kStale;
    }
    RPMEM_LOG_NOTICE("pool set '%s' reopened by its session of before the restart",
                     req.pool_set.c_str());
    count_reopened();
  } else if (!create && !poolset_path.empty() && session_tokens::runs_ahead(poolset_path)) {
    if (Status s = open_behind(req); s != Status::kSuccess) return s;
  }
  if (pool_->size() < rpmem::kMinPool) {
    RPMEM_LOG_ERR("invalid pool size -- must be >= %zu", rpmem::kMinPool);
    return Status::kPoolCfg;
  }
  if (pool_->size() < req.pool_size) {
    RPMEM_LOG_ERR("requested size is too big");
    return Status::kBadSize;
  }
  return Status::kSuccess;
}

// An open of a pool that may be behind its master (the token of a session
// that could run ahead of it: that session ended without a close), by
// anyone but that session: refused, unless the opener overrides it, which
// is logged.
Status Session::open_behind(const proto::PoolRequest &req) const {
  if ((req.ahead_flags & proto::kOpenBehind) != 0) {
    RPMEM_LOG_WARN(
        "pool set '%s' opened though it may be behind its master (the opener's override, "
        "RPMEM_OPEN_BEHIND)",
        req.pool_set.c_str());
    return Status::kSuccess;
  }
  RPMEM_LOG_ERR(
      "cannot open pool set '%s': it may be behind its master (a client that could run ahead "
      "of it ended its session without a close): its own client's next open, or pmempool "
      "sync from the master, brings it up to date",
      req.pool_set.c_str());
  return req.minor >= proto::kMinorRunAhead ? Status::kBehind : Status::kBusy;
}

// The lanes' keys: sealed lanes take a master from the control channel's TLS
// session (service) or a random one handed over ssh; TLS lanes use the
// control channel's certificates (service) or a pre-shared key of the
// session (ssh).
Status Session::key_lanes(const LaneSecurity &security, rpmem::transport::TargetParams &tp,
                          proto::PoolResponse &resp) const {
  if (security.sealed) {
    tp.seal.on = true;
    tp.seal.nonces = tp.client_minor >= proto::kMinorProofs;  // nonces of both ends
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
      return Status::kFatal;
    }
  } else if (security.tls && params_.cert_lanes) {
    tp.tls = params_.cert_lanes;  // the control channel's certificates
  } else if (security.tls) {
    // ssh mode: a key of this session's, handed over the ssh channel.
    proto::Secret psk;
    std::string why;
    if (random_secret(psk)) tp.tls.ctx = rpmem::transport::tcp::make_psk_context(true, psk, why);
    if (!tp.tls.ctx) {
      RPMEM_LOG_ERR("cannot key the TLS data lanes: %s",
                    why.empty() ? std::strerror(errno) : why.c_str());
      return Status::kFatal;
    }
    resp.lane_psk.assign(psk.begin(), psk.end());
  }
  resp.lane_flags = security.lane_flags();
  return Status::kSuccess;
}

// verbs when both sides allow it and it can serve here (a device, an RDMA
// address), else tcp; then started, before the answer: a target that cannot
// serve (no thread to start) fails the request, rather than the lanes of a
// client told all is well.
Status Session::start_target(uint32_t offered, const rpmem::transport::TargetParams &tp,
                             proto::TransportKind &kind) {
  kind = proto::TransportKind::kTcp;
  if (offered & kVerbs) {
    try {
      target_ = params_.make_target(proto::TransportKind::kVerbs, *view_, tp);
      kind = proto::TransportKind::kVerbs;
    } catch (const std::system_error &e) {
      // No device or RDMA address here, or a client too old for this pool.
      const bool unusable = e.code().value() == EADDRNOTAVAIL || e.code().value() == ENODEV ||
                            e.code().value() == EPROTONOSUPPORT;
      if (!(offered & kTcp) || !unusable) {
        RPMEM_LOG_ERR("%s", e.what());
        return unusable ? Status::kProvNoSup : Status::kFatalConn;
      }
      RPMEM_LOG_NOTICE("%s: using tcp", e.what());
    }
  }
  if (!target_) {
    try {
      target_ = params_.make_target(proto::TransportKind::kTcp, *view_, tp);
    } catch (const std::exception &e) {
      RPMEM_LOG_ERR("%s", e.what());
      return Status::kFatalConn;
    }
  }
  apm_ = target_->persist_method() == proto::PersistMethod::kApm;
  try {
    target_->start();
  } catch (const std::exception &e) {
    RPMEM_LOG_ERR("cannot start the data listener: %s", e.what());
    return Status::kFatalConn;
  }
  return Status::kSuccess;
}

// The pool's new session token, for a client that can reopen with it (a
// reopen's keeps the token it proved beside, should this answer be lost).
// Without one (ssh mode, a client that cannot take it, a token that cannot
// be written) this session has the pool all the same: no earlier session
// may reopen it then.
void Session::issue_token(const proto::PoolRequest &req, const std::string &poolset_path,
                          proto::PoolResponse &resp) {
  if (poolset_path.empty()) return;
  const bool ahead = (req.ahead_flags & proto::kRunAhead) != 0;
  if (!params_.session_tokens && !ahead) {  // ssh mode: not the token's session
    session_tokens::forget(poolset_path);
    return;
  }
  resp.tokened = req.minor >= proto::kMinorResume;
  proto::SessionToken token{};
  const std::error_code tec =
      resp.tokened ? session_tokens::issue(poolset_path, pool_->part_ids(),
                                           req.reopen ? &req.token : nullptr, ahead, token)
                   : std::error_code{};
  if (resp.tokened && !tec) {
    resp.token.assign(token.begin(), token.end());
    token_path_ = poolset_path;
    return;
  }
  session_tokens::forget(poolset_path);
  if (tec)
    RPMEM_LOG_WARN("no session token for '%s' (%s): its client cannot reopen it after a restart",
                   req.pool_set.c_str(), tec.message().c_str());
}

// A pool in the page cache may hold visible bytes of a session that did not
// end cleanly (its rpmemd killed): nothing counts them, and no write-back
// bound covers them any more. They are made persistent before this
// session's first acknowledgement, whatever its level (a clean pool costs
// an msync that finds nothing to write).
Status Session::write_back_left_over(bool create) {
  rpmem::transport::Persister &persister = pool_->persister();
  if (create || !persister.traits().visible_cheaper) return Status::kSuccess;
  if (auto ec = persister.sync_all()) {
    RPMEM_LOG_ERR("cannot make pool set '%s' persistent at its open: %s", pool_set_.c_str(),
                  ec.message().c_str());
    return proto::errno_to_status(ec.value());
  }
  RPMEM_LOG_DEBUG("pool set '%s' written back at its open", pool_set_.c_str());
  return Status::kSuccess;
}

// The visible level, for a client that can ask for it (minor 7) where this
// daemon grants it: where it costs less than persistent, only with the
// thread that bounds how long its bytes stay in memory.
Status Session::grant_levels(const proto::PoolRequest &req) {
  bool visible = params_.durability_visible && req.minor >= proto::kMinorLevels;
  if (visible && view_->traits().visible_cheaper) {
    try {
      write_back_ = std::make_unique<WriteBack>(pool_->persister(), params_.visible_writeback);
    } catch (const std::system_error &e) {
      RPMEM_LOG_ERR("no write-back thread for the visible level: %s", e.what());
      if (req.durability == proto::Durability::kVisible) return Status::kFatal;
      visible = false;
    }
  }
  view_->grant_visible(visible);
  return Status::kSuccess;
}

rpmem::transport::TargetParams Session::target_params(const proto::PoolRequest &req,
                                                      const proto::Secret &secret,
                                                      unsigned nlanes) const {
  rpmem::transport::TargetParams tp = params_.target;
  tp.secret = secret;
  tp.max_lanes = nlanes;
  tp.client_minor = req.minor;
  if (params_.status) tp.counters = std::make_shared<rpmem::transport::TargetCounters>(nlanes);
  const int fatal_fd = fatal_fd_;
  tp.on_fatal = [fatal_fd](const std::string &) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fatal_fd, &one, sizeof(one));
  };
  // APM with --persist-apm where the medium makes it sound: over verbs by
  // RDMA READ (where the pool is registered), over tcp each write is made
  // durable as it lands.
  tp.persist_method = params_.persist_apm && view_->traits().apm_sound
                          ? proto::PersistMethod::kApm
                          : proto::PersistMethod::kGpspm;
  return tp;
}

Status Session::open_or_create(MsgType type, const proto::PoolRequest &req,
                               proto::PoolResponse &resp) {
  const bool create = type == MsgType::kCreate;
  LaneSecurity security;
  uint32_t offered = 0;
  rpmem::PoolAttr attr = req.attr;
  if (Status s = check_request(req, security, offered, resp); s != Status::kSuccess) return s;
  if (req.durability == proto::Durability::kVisible && !params_.durability_visible) {
    RPMEM_LOG_ERR(
        "the client asks for the visible durability level, which this daemon does not "
        "grant (durability-visible is no)");
    return Status::kNoLevel;
  }
  if (Status s = open_pool(create, req, attr); s != Status::kSuccess) return s;
  auto undo = [&](Status s) {
    release(create);
    return s;
  };
  if (Status s = write_back_left_over(create); s != Status::kSuccess) return undo(s);
  std::string poolset_path;
  if (Status s = check_pool(create, req, poolset_path); s != Status::kSuccess) return undo(s);
  std::string why;
  const unsigned nlanes = grant_.take(req.nlanes, params_.max_lanes, (offered & kVerbs) ? 2 : 1,
                                      params_.client_lanes, params_.max_client_lanes, why);
  if (nlanes == 0) {
    RPMEM_LOG_ERR("%s", why.c_str());
    return undo(Status::kBadNlanes);
  }
  if (!random_secret(resp.secret)) {
    RPMEM_LOG_ERR("cannot generate the session secret: %s", std::strerror(errno));
    return undo(Status::kFatal);
  }
  view_ = std::make_unique<rpmem::transport::TargetPool>(
      pool_->base(), req.pool_size, pool_->has_headers() ? rpmem::kPoolHdrSize : 0,
      pool_->persister());
  if (Status s = grant_levels(req); s != Status::kSuccess) return undo(s);
  rpmem::transport::TargetParams tp = target_params(req, resp.secret, nlanes);
  if (Status s = key_lanes(security, tp, resp); s != Status::kSuccess) return undo(s);
  proto::TransportKind kind{};
  if (Status s = start_target(offered, tp, kind); s != Status::kSuccess) return undo(s);
  log_policy(kind, apm_, view_->traits(), target_->data_path(),
             durability_text(req.durability, view_->visible(true), view_->traits(),
                             params_.visible_writeback));
  if (params_.status) {
    PoolInfo info;
    info.pool_set = req.pool_set;
    info.lanes_asked = req.nlanes;
    info.lanes_granted = nlanes;
    info.transport = proto::lanes_name(kind, security.lane_flags());
    info.medium = view_->traits().name;
    info.method = proto::method_name(target_->persist_method());
    info.durability = proto::durability_name(req.durability);
    rpmem::transport::Persister &persister = pool_->persister();
    params_.status->pool_opened(info, tp.counters, [&persister] {
      return static_cast<int64_t>(persister.unpersisted_age().count());
    });
  }
  ahead_ = (req.ahead_flags & proto::kRunAhead) != 0;
  if (params_.behind)
    params_.behind->opened(pool_set_, params_.status ? params_.status->cn() : "");
  resp.nlanes = nlanes;
  resp.port = target_->port();
  resp.transport = kind;
  resp.method = target_->persist_method();
  resp.pool_flags = pool_->has_headers() ? proto::kPoolHasHeaders : 0;
  resp.remote_size = pool_->size();
  resp.attr = create ? rpmem::PoolAttr{} : attr;
  resp.provider_data = target_->provider_data();
  issue_token(req, poolset_path, resp);
  if (req.minor >= proto::kMinorLevels) {  // the level extension, after a token (maybe empty)
    resp.tokened = resp.leveled = true;
    if (view_->visible(true)) resp.levels |= proto::level_bit(proto::Durability::kVisible);
  }
  log_response({create, resp.port, kind, pool_->size(), nlanes, apm_, security.sealed, security.tls,
                static_cast<bool>(params_.export_keying_material),
                static_cast<bool>(params_.cert_lanes)});
  return Status::kSuccess;
}

}  // namespace rpmemd
