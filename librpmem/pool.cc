// SPDX-License-Identifier: BSD-3-Clause
// Pool: creating or opening a remote pool (Pool::connect): the handshake
// (connector.h), the lanes with the security chosen for them, the keepalive
// thread; the data path is in pool_data.cc, set_attr, close and remove in
// pool_control.cc, the keepalives, the reopen and the loss in
// pool_watch.cc.
#include "librpmem/pool.h"

#include "common/log.h"
#include "librpmem/errormsg.h"
#include "librpmem/pool_detail.h"

#include <thread>

namespace rpmem {

using pool_detail::checked_target;
using pool_detail::end_session;
using pool_detail::fail;
using pool_detail::with_errno;
using proto::MsgType;

namespace {

constexpr uint32_t tcp_bit = proto::transport_bit(proto::TransportKind::kTcp);
constexpr uint32_t verbs_bit = proto::transport_bit(proto::TransportKind::kVerbs);

// The pool's notice, and what the target does not give of what the
// settings ask.
void log_pool(const PoolArgs &args, const Handshake &hs, const Settings &settings,
              uint32_t transports) {
  const proto::PoolResponse &resp = hs.response;
  const uint32_t offered = hs.hello.transports;
  const bool lane_tls = (resp.lane_flags & proto::kLaneTls) != 0;
  const bool sealed = lane_tls && (resp.lane_flags & proto::kLaneSealed) != 0;
  RPMEM_LOG_NOTICE("%s: pool '%s' %s, %u lanes, transport %s%s (accepted:%s%s, offered:%s%s)",
                   args.target.c_str(), args.pool_set.c_str(), args.create ? "created" : "opened",
                   resp.nlanes, proto::transport_name(resp.transport),
                   resp.transport == proto::TransportKind::kVerbs
                       ? (resp.method == proto::PersistMethod::kApm ? " APM" : " GPSPM")
                   : sealed   ? " sealed"
                   : lane_tls ? " in TLS"
                              : "",
                   (transports & verbs_bit) ? " verbs" : "", (transports & tcp_bit) ? " tcp" : "",
                   (offered & verbs_bit) ? " verbs" : "", (offered & tcp_bit) ? " tcp" : "");
  if (settings.visible && !hs.request.leveled)
    RPMEM_LOG_NOTICE(
        "%s: RPMEM_DURABILITY=visible, but the target predates durability levels "
        "(protocol %u.%u): the pool is persistent",
        args.target.c_str(), hs.hello.major, hs.hello.minor);
  if (settings.run_ahead && hs.hello.minor < proto::kMinorRunAhead)
    RPMEM_LOG_NOTICE(
        "%s: RPMEM_ON_LOSS=continue, but the target cannot mark a pool behind (protocol %u.%u): "
        "the pool fails on a loss",
        args.target.c_str(), hs.hello.major, hs.hello.minor);
}

// The lanes failed: the session ends (with a close request when `close`),
// and the open fails in PMDK's words.
int lanes_failed(ControlChannel &ch, bool create, bool close, const Error &e,
                 std::chrono::milliseconds ctl_timeout) {
  if (close) end_session(ch, create, ctl_timeout);
  int err = e.code.value();
  return fail(err, with_errno("establishing in-band connection failed", err), e.message);
}

// The run-ahead extension of a request to the daemon of `hello` (minor 10):
// `ahead`, the session may run ahead of the pool; `behind`, open it though
// it may be behind its master.
void ahead_request(proto::PoolRequest &req, const proto::Hello &hello, bool ahead, bool behind) {
  if (hello.minor < proto::kMinorRunAhead || !req.leveled || !(ahead || behind)) return;
  req.ahead = true;
  req.ahead_flags = (ahead ? proto::kRunAhead : 0) | (behind ? proto::kOpenBehind : 0);
}

// How long an open with a record waits between tries while the pool is
// busy (its last session, of a process that ended, not over yet).
constexpr std::chrono::milliseconds kBusyPause{200};

// The handshake of an open; with a record (`found`), a token the target no
// longer knows opens the pool anew (`fresh`: the whole pool is sent again),
// and a busy pool is tried again within RPMEM_TIMEOUT.
int open_with_record(Connector &connector, const Settings &settings, const HandshakeArgs &ha,
                     const std::optional<PoolRecord> &found, bool &fresh, Handshake &hs) {
  const auto deadline = std::chrono::steady_clock::now() + settings.timeout;
  for (;;) {
    hs = Handshake{};
    if (int err = handshake(connector, settings, ha, hs)) return err;
    if (!found || ha.create) return 0;
    const proto::Status st = hs.response.status;
    if (st == proto::Status::kStale && !fresh) {
      RPMEM_LOG_WARN(
          "%s: pool '%s': the target no longer knows this client's session (another opened the "
          "pool since): it is opened anew, and the whole pool sent to it",
          found->target.c_str(), found->pool_set.c_str());
      fresh = true;
    } else if (st != proto::Status::kBusy || std::chrono::steady_clock::now() >= deadline) {
      return 0;
    }
    hs.channel->close(std::chrono::milliseconds(200));
    if (st == proto::Status::kBusy) std::this_thread::sleep_for(kBusyPause);
  }
}

}  // namespace

Pool::Pool(Settings settings, Connector &connector, const Handshake &hs, const uint8_t *base,
           size_t size, Lanes lanes)
    : settings_(std::move(settings)),
      connector_(connector),
      base_(base),
      size_(size),
      has_headers_((hs.response.pool_flags & proto::kPoolHasHeaders) != 0),
      visible_pool_(hs.request.durability == proto::Durability::kVisible),
      visible_granted_((hs.response.levels & proto::level_bit(proto::Durability::kVisible)) != 0),
      lanes_(std::move(lanes)),
      life_(settings_.run_ahead,
            PoolHooks{[this](const std::string &why) { return prepare_behind(why); },
                      [this](bool behind) { on_lost(behind); }}) {}

Pool::~Pool() { stop_keepalive(); }

void Pool::keep_for_reopen(const TargetAddress &target, const Handshake &hs, const PoolAttr &attr,
                           std::shared_ptr<transport::LaneRoute> route) {
  auto r = std::make_unique<Reopen>();
  r->target = target;
  r->request = hs.request;
  r->request.nlanes = hs.response.nlanes;
  r->request.transports = proto::transport_bit(hs.response.transport);  // its lanes' transport
  r->transport = hs.response.transport;
  r->request.extended = true;
  r->request.reopen = true;
  r->request.attr = PoolAttr{};
  r->token = hs.response.token;
  r->attr = attr;
  r->lane_flags = hs.response.lane_flags & proto::kLaneFlags;
  r->route = std::move(route);
  reopen_ = std::move(r);
}

int Pool::connect(const PoolArgs &args, std::unique_ptr<Pool> &out, unsigned &nlanes,
                  PoolAttr *open_attr, Connector &connector, const Settings *given) noexcept try {
  init_logging_once();
  auto target = checked_target(args.target);
  if (!target) return EINVAL;
  Settings settings = given ? *given : Settings::from_env();
  if (!settings.bad.empty()) return fail(EINVAL, settings.bad);
  const uint32_t transports = client_transports(settings);
  if (!transports) return fail(ENOMEDIUM, "cannot find provider");
  const auto ctl_timeout = settings.control_timeout();
  // A record of the pool says its replica is behind (this client ran ahead
  // of it): the pool is opened with its token (as its own session), runs
  // ahead until it has caught up, whatever RPMEM_ON_LOSS says.
  if (settings.state_dir.empty()) settings.state_dir = default_state_dir();
  StateRecord record(settings.state_dir, args.target, args.pool_set);
  std::optional<PoolRecord> found = record.load();
  if (found && found->pool_size != args.size) found.reset();  // another pool's
  const bool old_record = args.create && found;               // of a pool the create makes anew
  if (args.create) found.reset();
  bool fresh = false;  // the target refused the record's token
  HandshakeArgs ha;
  ha.target = *target;
  ha.create = args.create;
  ha.transports = transports;
  ha.step = ha.answer = ctl_timeout;
  ha.request = [&](const proto::Hello &hello, proto::PoolRequest &req) {
    req = pool_request(args.pool_set, args.size, args.nlanes, args.create, args.create_attr,
                       settings, hello, transports);
    ahead_request(req, hello, settings.run_ahead || found, settings.open_behind || fresh);
    if (found && !fresh && req.extended) {
      req.reopen = true;
      req.token = found->token;
    }
    return 0;
  };
  Handshake hs;
  if (int err = open_with_record(connector, settings, ha, found, fresh, hs)) return err;
  const proto::PoolResponse &resp = hs.response;
  if (resp.status != proto::Status::kSuccess)
    return fail(proto::status_to_errno(resp.status), proto::status_message(resp.status));
  log_pool(args, hs, settings, transports);
  const auto *base = static_cast<const uint8_t *>(args.addr);
  transport::InitiatorParams params =
      lane_params(*target, resp, hs.hello, settings, base, args.size);
  auto security =
      choose_lane_security(hs.request.lane_flags, resp.lane_flags, resp.transport, target->service);
  Result<Lanes> lanes =
      security ? connector.lanes(*security, *target, resp, *hs.channel, settings, params)
               : Result<Lanes>(security.error());
  // With a record, the session ends without a close request: rpmemd keeps
  // the pool marked behind, and this client's token.
  if (!lanes) return lanes_failed(*hs.channel, args.create, !found, lanes.error(), ctl_timeout);
  const bool keepalives = hs.hello.minor >= proto::kMinorKeepalive;
  nlanes = resp.nlanes;
  if (open_attr && !args.create) *open_attr = resp.attr;
  const PoolAttr attr = args.create ? args.create_attr : resp.attr;
  if (old_record) record.remove();
  // RPMEM_ON_LOSS=continue towards a target that marks the pool, or a
  // record (its replica is behind, whatever the target).
  const bool ahead = found || (settings.run_ahead && hs.hello.minor >= proto::kMinorRunAhead);
  settings.run_ahead = ahead;
  std::unique_ptr<Pool> pool(
      new Pool(std::move(settings), connector, hs, base, args.size, std::move(lanes.value())));
  if (ahead) {
    if (auto ec = pool->start_ahead(args, hs, *target, attr, found, fresh)) {
      if (!found) end_session(*hs.channel, args.create, ctl_timeout);
      return fail(ec.value(), "cannot keep the pool's record in the state directory (" +
                                  pool->settings_.state_dir + "): " + ec.message());
    }
  }
  // A service that gave a token takes the pool back after a restart.
  if (target->service && params.route && resp.token.size() == proto::kTokenSize)
    pool->keep_for_reopen(*target, hs, attr, params.route);
  pool->channel_ = std::move(hs.channel);
  pool->start_keepalive(keepalives);
  out = std::move(pool);
  return 0;
} catch (const std::bad_alloc &) {
  return fail(ENOMEM, "out of memory");
} catch (const std::exception &e) {
  return fail(EREMOTEIO, e.what());
}

}  // namespace rpmem
