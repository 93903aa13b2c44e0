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

namespace rpmem {

using pool_detail::checked_target;
using pool_detail::fail;
using pool_detail::with_errno;
using proto::MsgType;

namespace {

constexpr uint32_t tcp_bit = proto::transport_bit(proto::TransportKind::kTcp);
constexpr uint32_t verbs_bit = proto::transport_bit(proto::TransportKind::kVerbs);

void log_pool(const PoolArgs &args, const proto::PoolResponse &resp, uint32_t transports,
              uint32_t offered) {
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
}

// The lanes failed: lets the target undo what it did (a created pool is
// removed), and fails in PMDK's words.
int lanes_failed(ControlChannel &ch, bool create, const Error &e,
                 std::chrono::milliseconds ctl_timeout) {
  proto::CloseRequest close{create ? proto::kCloseRemove : 0};
  proto::Bytes payload;
  if (!ch.send(proto::encode(close), ctl_timeout))
    ch.recv(MsgType::kCloseResp, payload, ctl_timeout);
  int err = e.code.value();
  return fail(err, with_errno("establishing in-band connection failed", err), e.message);
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
      life_([this] { lanes_.shutdown_all(); }) {}

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
  HandshakeArgs ha;
  ha.target = *target;
  ha.create = args.create;
  ha.transports = transports;
  ha.step = ha.answer = ctl_timeout;
  ha.request = [&](const proto::Hello &hello, proto::PoolRequest &req) {
    req = pool_request(args.pool_set, args.size, args.nlanes, args.create, args.create_attr,
                       settings, hello, transports);
    return 0;
  };
  Handshake hs;
  if (int err = handshake(connector, settings, ha, hs)) return err;
  const proto::PoolResponse &resp = hs.response;
  if (resp.status != proto::Status::kSuccess)
    return fail(proto::status_to_errno(resp.status), proto::status_message(resp.status));
  log_pool(args, resp, transports, hs.hello.transports);
  if (settings.visible && !hs.request.leveled)
    RPMEM_LOG_NOTICE(
        "%s: RPMEM_DURABILITY=visible, but the target predates durability levels "
        "(protocol %u.%u): the pool is persistent",
        args.target.c_str(), hs.hello.major, hs.hello.minor);
  const auto *base = static_cast<const uint8_t *>(args.addr);
  transport::InitiatorParams params =
      lane_params(*target, resp, hs.hello, settings, base, args.size);
  auto security =
      choose_lane_security(hs.request.lane_flags, resp.lane_flags, resp.transport, target->service);
  Result<Lanes> lanes =
      security ? connector.lanes(*security, *target, resp, *hs.channel, settings, params)
               : Result<Lanes>(security.error());
  if (!lanes) return lanes_failed(*hs.channel, args.create, lanes.error(), ctl_timeout);
  const bool keepalives = hs.hello.minor >= proto::kMinorKeepalive;
  nlanes = resp.nlanes;
  if (open_attr && !args.create) *open_attr = resp.attr;
  const PoolAttr attr = args.create ? args.create_attr : resp.attr;
  std::unique_ptr<Pool> pool(
      new Pool(std::move(settings), connector, hs, base, args.size, std::move(lanes.value())));
  // A service that gave a token takes the pool back after a restart.
  if (target->service && params.route && resp.token.size() == proto::kTokenSize)
    pool->keep_for_reopen(*target, hs, attr, params.route);
  pool->channel_ = std::move(hs.channel);
  try {
    pool->start_keepalive(keepalives);
  } catch (const std::system_error &e) {  // the session works without
    RPMEM_LOG_WARN("no keepalive thread: %s", e.what());
  }
  out = std::move(pool);
  return 0;
} catch (const std::bad_alloc &) {
  return fail(ENOMEM, "out of memory");
} catch (const std::exception &e) {
  return fail(EREMOTEIO, e.what());
}

}  // namespace rpmem
