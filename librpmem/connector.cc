// SPDX-License-Identifier: BSD-3-Clause
// The system's Connector (ssh or TLS, real lanes keyed the chosen way) and
// the handshake steps a create, an open and a reopen share.
#include "librpmem/connector.h"

#include "common/log.h"
#include "common/text.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/tls_stream.h"
#include "librpmem/errormsg.h"
#include "librpmem/pool_detail.h"
#include "librpmem/ssh_channel.h"
#include "librpmem/tls_channel.h"

namespace rpmem {

using pool_detail::fail;
using pool_detail::with_errno;
using proto::MsgType;

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

// The daemon's hello: it serves us, speaks our protocol, offers a
// transport we take, and TLS lanes when RPMEM_DATA_TLS=1 asks for them.
int receive_hello(ControlChannel &ch, const Settings &settings, uint32_t transports,
                  std::chrono::milliseconds timeout, proto::Hello &out) {
  proto::Bytes payload;
  if (auto ec = ch.recv(MsgType::kHello, payload, timeout)) return oob_failure(ec, ch, timeout);
  auto hello = proto::decode_hello(payload);
  if (!hello) return oob_failure(errc(EPROTO), ch, timeout);
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

class SystemConnector final : public Connector {
 public:
  Result<std::unique_ptr<ControlChannel>> channel(const TargetAddress &target,
                                                  const Settings &settings,
                                                  std::chrono::milliseconds timeout) override {
    if (target.service) {
      auto tls = TlsChannel::connect(target, settings, timeout);
      if (!tls)
        return Error{tls.error().code, "out-of-band connection failed: " + tls.error().message};
      return std::unique_ptr<ControlChannel>(std::move(tls.value()));
    }
    auto spawned = SshChannel::spawn(settings, target, settings.next_cmd(), {});
    if (!spawned) {
      const int err = spawned.error().code.value();
      RPMEM_LOG_ERR("out-of-band connection failed -- %s", spawned.error().message.c_str());
      return Error{spawned.error().code, with_errno("out-of-band connection failed", err)};
    }
    return std::unique_ptr<ControlChannel>(std::move(spawned.value()));
  }

  Result<Lanes> lanes(LaneSecurity security, const TargetAddress &target,
                      const proto::PoolResponse &resp, ControlChannel &ch, const Settings &settings,
                      transport::InitiatorParams &params) override {
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
};

}  // namespace

Connector &system_connector() {
  static SystemConnector connector;
  return connector;
}

uint32_t client_transports(const Settings &s) {
  uint32_t t = 0;
  if (s.enable_sockets) t |= proto::transport_bit(proto::TransportKind::kTcp);
  if (s.enable_verbs) t |= proto::transport_bit(proto::TransportKind::kVerbs);
  return t & transport::available_transports();
}

int handshake(Connector &c, const Settings &settings, const HandshakeArgs &args, Handshake &out) {
  auto channel = c.channel(args.target, settings, args.step);
  if (!channel) return fail(channel.error().code.value(), channel.error().message);
  out.channel = std::move(channel.value());
  ControlChannel &ch = *out.channel;
  if (int err = receive_hello(ch, settings, args.transports, args.step, out.hello)) return err;
  if (int err = args.request(out.hello, out.request)) return err;
  if (out.request.pool_set.size() > proto::kMaxPoolSetName)
    return fail(EINVAL, proto::status_message(proto::Status::kBadName));
  const MsgType type = args.create ? MsgType::kCreate : MsgType::kOpen;
  if (auto ec = ch.send(proto::encode(type, out.request), args.step))
    return request_failure(ec, ch, args.create, true, args.step);
  proto::Bytes payload;
  if (auto ec = ch.recv(MsgType::kPoolResp, payload, args.answer))
    return request_failure(ec, ch, args.create, false, args.answer);
  auto resp = proto::decode_pool_response(payload);
  if (!resp || (resp->status == proto::Status::kSuccess && resp->nlanes > out.request.nlanes))
    return fail(EPROTO, "invalid response from the target");
  out.response = std::move(*resp);
  return 0;
}

proto::PoolRequest pool_request(const std::string &pool_set, size_t size, unsigned nlanes,
                                bool create, const PoolAttr &create_attr, const Settings &settings,
                                const proto::Hello &hello, uint32_t transports) {
  proto::PoolRequest req;
  if (settings.data_tls) req.lane_flags = proto::kLaneTls;
  if (settings.data_seal && hello.minor >= proto::kMinorSealed)
    req.lane_flags |= proto::kLaneSealed;  // can seal, should the lanes be encrypted
  req.nlanes = std::min(nlanes, settings.max_nlanes);
  req.pool_size = size;
  req.transports = transports & hello.transports;
  req.pool_set = pool_set;
  if (create) req.attr = create_attr;
  req.extended = hello.minor >= proto::kMinorResume;  // it takes the reopen extension
  // ... and the level extension; an older daemon's pools are persistent.
  req.leveled = hello.minor >= proto::kMinorLevels;
  if (settings.visible && req.leveled) req.durability = proto::Durability::kVisible;
  return req;
}

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
  params.comeback = transport::lanes_come_back(resp.transport, hello.minor);
  params.proofs = hello.minor >= proto::kMinorProofs;
  params.probes = hello.minor >= proto::kMinorProbes;
  if (params.comeback && target.service)
    params.route = std::make_shared<transport::LaneRoute>(
        transport::LaneRoute::Where{resp.port, resp.secret, {}, resp.provider_data});
  return params;
}

}  // namespace rpmem
