// SPDX-License-Identifier: BSD-3-Clause
// Pool: creating or opening a remote pool (Pool::connect) as named steps --
// the control channel, the daemon's hello, the pool request, the lanes with
// the security chosen for them; the data path is in pool_data.cc, set_attr,
// close and remove in pool_control.cc, keepalives and reopening in
// pool_reopen.cc.
#include "librpmem/pool.h"

#include "common/log.h"
#include "common/text.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/tls_stream.h"
#include "librpmem/errormsg.h"
#include "librpmem/lane_security.h"
#include "librpmem/pool_detail.h"
#include "librpmem/ssh_channel.h"
#include "librpmem/tls_channel.h"

#include <cstring>

namespace rpmem {

using pool_detail::checked_target;
using pool_detail::fail;
using pool_detail::with_errno;
using proto::MsgType;
using Lanes = std::vector<std::unique_ptr<transport::InitiatorLane>>;

namespace {

// A control-channel failure while it is set up (before the first status).
// A wait that ran out is ETIMEDOUT, and the message says so; anything else
// in PMDK's words (ECONNRESET, or EPROTO).
int oob_failure(std::error_code ec, ControlChannel &ch, std::chrono::milliseconds waited) {
  std::string detail = ch.diagnostics();
  if (ec == std::errc::timed_out)
    return fail(ETIMEDOUT, "out-of-band connection failed: " + no_answer_text(waited), detail);
  int err = ec.value() == EPROTO ? EPROTO : ECONNRESET;
  if (detail.empty()) detail = ec.message();
  return fail(err, with_errno("out-of-band connection failed", err), detail);
}

// A failed exchange of a create/open request, in PMDK's words (a timeout:
// ETIMEDOUT, naming it).
int request_failure(std::error_code ec, ControlChannel &ch, bool create, bool sending,
                    std::chrono::milliseconds waited) {
  std::string what = std::string(sending ? "sending " : "receiving ") +
                     (create ? "create" : "open") +
                     (sending ? " request message failed" : " request response failed");
  std::string detail = ch.diagnostics();
  if (ec == std::errc::timed_out)
    return fail(ETIMEDOUT, what + ": " + no_answer_text(waited), detail);
  int err = ec.value() == EPROTO ? EPROTO : ECONNRESET;
  if (detail.empty()) detail = ec.message();
  return fail(err, with_errno(what.c_str(), err), detail);
}

constexpr uint32_t tcp_bit = proto::transport_bit(proto::TransportKind::kTcp);
constexpr uint32_t verbs_bit = proto::transport_bit(proto::TransportKind::kVerbs);

// What this client accepts: enabled by the environment and usable here
// (verbs only with an RDMA device).
uint32_t client_transports(const Settings &s) {
  uint32_t t = 0;
  uint32_t built = transport::available_transports();
  if (s.enable_sockets) t |= proto::transport_bit(proto::TransportKind::kTcp);
  if (s.enable_verbs) t |= proto::transport_bit(proto::TransportKind::kVerbs);
  return t & built;
}

// The control channel to the target's rpmemd: TLS to a service (rpmems://),
// else rpmemd started over ssh.
int open_channel(const TargetAddress &target, const Settings &settings,
                 std::unique_ptr<ControlChannel> &channel) {
  if (target.service) {
    auto tls = TlsChannel::connect(target, settings);
    if (!tls)
      return fail(tls.error().code.value(),
                  "out-of-band connection failed: " + tls.error().message);
    channel = std::move(tls.value());
  } else {
    auto spawned = SshChannel::spawn(settings, target, settings.next_cmd(), {});
    if (!spawned) {
      int err = spawned.error().code.value();
      return fail(err, with_errno("out-of-band connection failed", err), spawned.error().message);
    }
    channel = std::move(spawned.value());
  }
  return 0;
}

// The daemon's hello: it serves us, speaks our protocol, offers a
// transport we take, and TLS lanes when RPMEM_DATA_TLS=1 asks for them.
int receive_hello(ControlChannel &ch, const Settings &settings, uint32_t transports,
                  proto::Hello &out) {
  const auto ctl_timeout = settings.control_timeout();
  proto::Bytes payload;
  if (auto ec = ch.recv(MsgType::kHello, payload, ctl_timeout))
    return oob_failure(ec, ch, ctl_timeout);
  auto hello = proto::decode_hello(payload);
  if (!hello) return oob_failure(errc(EPROTO), ch, ctl_timeout);
  if (hello->status != 0) {
    const int err = wire::errno_of(hello->status);
    return fail(err, with_errno("out-of-band connection failed", err), ch.diagnostics());
  }
  if (hello->major != proto::kMajor)
    return fail(EPROTONOSUPPORT, proto::status_message(proto::Status::kBadProto));
  if ((transports & hello->transports) == 0) return fail(ENOMEDIUM, "cannot find provider");
  if (settings.data_tls && hello->minor < proto::kMinorLaneTls)
    return fail(EMEDIUMTYPE, proto::status_message(proto::Status::kProvNoSup),
                "RPMEM_DATA_TLS=1, but the target's rpmemd (protocol " +
                    std::to_string(hello->major) + "." + std::to_string(hello->minor) +
                    ") has no TLS data lanes");
  out = *hello;
  return 0;
}

// The create or open request: the pool, the lanes, the transports and the
// lanes' security this client takes.
proto::PoolRequest pool_request(const PoolArgs &args, const Settings &settings,
                                const proto::Hello &hello, uint32_t transports) {
  proto::PoolRequest req;
  if (settings.data_tls) req.lane_flags = proto::kLaneTls;
  if (settings.data_seal && hello.minor >= proto::kMinorSealed)
    req.lane_flags |= proto::kLaneSealed;  // can seal, should the lanes be encrypted
  req.nlanes = std::min(args.nlanes, settings.max_nlanes);
  req.pool_size = args.size;
  req.transports = transports & hello.transports;
  req.pool_set = args.pool_set;
  if (args.create) req.attr = args.create_attr;
  req.extended = hello.minor >= proto::kMinorResume;  // it takes the reopen extension
  // ... and the level extension; an older daemon's pools are persistent.
  req.leveled = hello.minor >= proto::kMinorLevels;
  if (settings.visible && req.leveled) req.durability = proto::Durability::kVisible;
  return req;
}

// Sends the request and takes the daemon's answer: the pool granted, or why
// not.
int request_pool(ControlChannel &ch, const PoolArgs &args, const proto::PoolRequest &req,
                 std::chrono::milliseconds ctl_timeout, proto::PoolResponse &out) {
  proto::Bytes payload;
  if (req.pool_set.size() > proto::kMaxPoolSetName)
    return fail(EINVAL, proto::status_message(proto::Status::kBadName));
  if (auto ec =
          ch.send(proto::encode(args.create ? MsgType::kCreate : MsgType::kOpen, req), ctl_timeout))
    return request_failure(ec, ch, args.create, true, ctl_timeout);
  if (auto ec = ch.recv(MsgType::kPoolResp, payload, ctl_timeout))
    return request_failure(ec, ch, args.create, false, ctl_timeout);
  auto resp = proto::decode_pool_response(payload);
  if (!resp || (resp->status == proto::Status::kSuccess && resp->nlanes > req.nlanes))
    return fail(EPROTO, "invalid response from the target");
  if (resp->status != proto::Status::kSuccess)
    return fail(proto::status_to_errno(resp->status), proto::status_message(resp->status));
  out = std::move(*resp);
  return 0;
}

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

// The lanes' parameters but their security.
transport::InitiatorParams lane_params(const TargetAddress &target, const proto::PoolResponse &resp,
                                       const proto::Hello &hello, const Settings &settings,
                                       const uint8_t *base, size_t size) {
  transport::InitiatorParams params;
  params.host = target.host;
  params.port = resp.port;
  params.secret = resp.secret;
  params.nlanes = resp.nlanes;
  params.local_base = base;
  params.pool_size = size;
  params.timeout = settings.timeout;
  params.provider_data = resp.provider_data;
  params.work_queue_size = settings.work_queue_size;
  // tcp lanes come back from protocol minor 6 on, verbs lanes from 8 on.
  params.comeback =
      hello.minor >= (resp.transport == proto::TransportKind::kVerbs ? proto::kMinorVerbsResume
                                                                     : proto::kMinorResume);
  params.proofs = hello.minor >= proto::kMinorProofs;
  if (params.comeback && target.service)
    params.route = std::make_shared<transport::LaneRoute>(
        transport::LaneRoute::Where{resp.port, resp.secret, {}, resp.provider_data});
  return params;
}

// Keys the lanes the chosen way and connects them.
Result<Lanes> connect_secured_lanes(LaneSecurity security, const TargetAddress &target,
                                    const proto::PoolResponse &resp, ControlChannel &ch,
                                    const Settings &settings, transport::InitiatorParams &params) {
  switch (security) {
    case LaneSecurity::kSealed: {
      params.seal.on = true;
      params.seal.nonces = params.proofs;  // both of protocol minor 9
      bool keyed = false;
      if (target.service) {  // bound to the control channel's TLS session
        keyed = resp.lane_psk.empty() &&
                ch.export_keying_material(params.seal.master.data(), params.seal.master.size(),
                                          transport::tcp::kSealExporterLabel, resp.secret.data(),
                                          resp.secret.size());
      } else if (resp.lane_psk.size() == params.seal.master.size()) {  // from the ssh channel
        std::copy(resp.lane_psk.begin(), resp.lane_psk.end(), params.seal.master.begin());
        keyed = true;
      }
      if (keyed && params.route)
        params.route->set(transport::LaneRoute::Where{resp.port, resp.secret, params.seal.master,
                                                      resp.provider_data});
      if (keyed) return transport::connect_lanes(resp.transport, params);
      return Error{errc(EPROTO), "sealed data lanes without a usable key"};
    }
    case LaneSecurity::kTlsCertificates: {  // the control channel's certificates
      auto ctx = lane_tls_context(settings);
      if (!ctx) return ctx.error();
      params.tls.ctx = std::move(ctx.value());
      params.tls.server_name = target.host;
      return transport::connect_lanes(resp.transport, params);
    }
    case LaneSecurity::kTlsSessionKey: {  // the session's key, from the ssh channel
      std::string why;
      if (!resp.lane_psk.empty())
        params.tls.ctx = transport::tcp::make_psk_context(false, resp.lane_psk, why);
      if (params.tls.ctx) return transport::connect_lanes(resp.transport, params);
      return Error{errc(EPROTO), "TLS data lanes without a usable key: " + why};
    }
    case LaneSecurity::kCleartext:
      break;
  }
  return transport::connect_lanes(resp.transport, params);
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

Pool::Pool(Settings settings, std::unique_ptr<ControlChannel> channel, const uint8_t *base,
           size_t size)
    : settings_(std::move(settings)), channel_(std::move(channel)), base_(base), size_(size) {}

Pool::~Pool() { stop_keepalive(); }

void Pool::keep_for_reopen(const TargetAddress &target, const proto::PoolRequest &req,
                           const proto::PoolResponse &resp, const PoolAttr &attr,
                           std::shared_ptr<transport::LaneRoute> route) {
  auto r = std::make_unique<Reopen>();
  r->target = target;
  r->request = req;
  r->request.nlanes = resp.nlanes;
  r->request.transports = proto::transport_bit(resp.transport);  // its lanes' transport
  r->transport = resp.transport;
  r->request.extended = true;
  r->request.reopen = true;
  r->request.attr = PoolAttr{};
  r->token = resp.token;
  r->attr = attr;
  r->lane_flags = resp.lane_flags & proto::kLaneFlags;
  r->route = std::move(route);
  reopen_ = std::move(r);
}

int Pool::connect(const PoolArgs &args, std::unique_ptr<Pool> &out, unsigned &nlanes,
                  PoolAttr *open_attr) noexcept try {
  init_logging_once();
  auto target = checked_target(args.target);
  if (!target) return EINVAL;
  Settings settings = Settings::from_env();
  if (!settings.durability_bad.empty())
    return fail(EINVAL, "RPMEM_DURABILITY: invalid value '" + settings.durability_bad +
                            "' (persistent or visible)");
  uint32_t transports = client_transports(settings);
  if (!transports) return fail(ENOMEDIUM, "cannot find provider");
  std::unique_ptr<ControlChannel> channel;
  if (int err = open_channel(*target, settings, channel)) return err;
  proto::Hello hello;
  if (int err = receive_hello(*channel, settings, transports, hello)) return err;
  const proto::PoolRequest req = pool_request(args, settings, hello, transports);
  const auto ctl_timeout = settings.control_timeout();
  proto::PoolResponse resp;
  if (int err = request_pool(*channel, args, req, ctl_timeout, resp)) return err;
  log_pool(args, resp, transports, hello.transports);

  std::unique_ptr<Pool> pool(new Pool(std::move(settings), std::move(channel),
                                      static_cast<const uint8_t *>(args.addr), args.size));
  pool->has_headers_ = (resp.pool_flags & proto::kPoolHasHeaders) != 0;
  pool->visible_granted_ = (resp.levels & proto::level_bit(proto::Durability::kVisible)) != 0;
  pool->visible_pool_ = req.durability == proto::Durability::kVisible;
  if (pool->settings_.visible && !req.leveled)
    RPMEM_LOG_NOTICE(
        "%s: RPMEM_DURABILITY=visible, but the target predates durability levels "
        "(protocol %u.%u): the pool is persistent",
        args.target.c_str(), hello.major, hello.minor);
  transport::InitiatorParams params =
      lane_params(*target, resp, hello, pool->settings_, pool->base_, args.size);
  auto security =
      choose_lane_security(req.lane_flags, resp.lane_flags, resp.transport, target->service);
  Result<Lanes> lanes = security ? connect_secured_lanes(*security, *target, resp, *pool->channel_,
                                                         pool->settings_, params)
                                 : Result<Lanes>(security.error());
  if (!lanes) return lanes_failed(*pool->channel_, args.create, lanes.error(), ctl_timeout);
  pool->lanes_ = std::move(lanes.value());
  // A service that gave a token takes the pool back after a restart.
  if (target->service && resp.token.size() == proto::kTokenSize && params.route)
    pool->keep_for_reopen(*target, req, resp, args.create ? args.create_attr : resp.attr,
                          params.route);
  try {
    pool->start_keepalive(hello.minor >= proto::kMinorKeepalive);
  } catch (const std::system_error &e) {  // the session works without
    RPMEM_LOG_WARN("no keepalive thread: %s", e.what());
  }
  nlanes = resp.nlanes;
  if (open_attr && !args.create) *open_attr = resp.attr;
  out = std::move(pool);
  return 0;
} catch (const std::bad_alloc &) {
  return fail(ENOMEM, "out of memory");
} catch (const std::exception &e) {
  return fail(EREMOTEIO, e.what());
}

}  // namespace rpmem
