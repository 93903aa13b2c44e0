// SPDX-License-Identifier: BSD-3-Clause
// Pool: create/open/close/remove over the control channel, data path over
// the lanes.
#include "librpmem/pool.h"

#include "common/log.h"
#include "common/text.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/tls_stream.h"
#include "librpmem/errormsg.h"
#include "librpmem/ssh_channel.h"
#include "librpmem/tls_channel.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace rpmem {
namespace {

using proto::MsgType;

int fail(int err, const std::string &msg) {
  set_errormsg(msg);
  return err;
}

// `msg` is PMDK's text for the failure, the one rpmem_errormsg() gives;
// what we know beyond it goes to the library's log only.
int fail(int err, const std::string &msg, const std::string &detail) {
  if (!detail.empty()) RPMEM_LOG_ERR("%s -- %s", msg.c_str(), detail.c_str());
  return fail(err, msg);
}

std::string with_errno(const char *msg, int err) { return std::string(msg) + ": " + strerror(err); }

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

// Sends `request` and receives its status reply (`reply_type`). A failed
// exchange is EPROTO (malformed reply) or ECONNRESET (anything else).
std::error_code status_exchange(ControlChannel &ch, const proto::Bytes &request, MsgType reply_type,
                                std::chrono::milliseconds timeout, proto::Status &status) {
  proto::Bytes payload;
  std::error_code ec = ch.send(request, timeout);
  if (!ec) ec = ch.recv(reply_type, payload, timeout);
  if (ec) return errc(ec.value() == EPROTO ? EPROTO : ECONNRESET);
  auto resp = proto::decode_status_response(payload);
  if (!resp) return errc(EPROTO);
  status = resp->status;
  return {};
}

// rpmem_remove on an rpmems:// target: a REMOVE request over TLS.
int remove_from_service(const TargetAddress &target, const Settings &settings,
                        const std::string &pool_set, int flags) {
  auto tls = TlsChannel::connect(target, settings);
  if (!tls) return fail(tls.error().code.value(), "remote command failed", tls.error().message);
  auto &ch = *tls.value();
  const auto timeout = settings.control_timeout();
  proto::Bytes payload;
  std::error_code ec = ch.recv(MsgType::kHello, payload, timeout);
  std::optional<proto::Hello> hello;
  if (!ec && !(hello = proto::decode_hello(payload))) ec = errc(EPROTO);
  if (!ec && hello->status != 0)
    return fail(hello->status < 4096 ? static_cast<int>(hello->status) : EPROTO,
                "remote command failed", strerror(static_cast<int>(hello->status)));
  if (pool_set.size() > proto::kMaxPoolSetName || pool_set.empty())
    return fail(EINVAL, proto::status_message(proto::Status::kBadName));
  proto::Status status = proto::Status::kSuccess;
  if (!ec)
    ec = status_exchange(
        ch, proto::encode(proto::RemoveRequest{static_cast<uint32_t>(flags), pool_set}),
        MsgType::kRemoveResp, timeout, status);
  ch.close(timeout);
  if (ec) {
    int err = ec.value() == EPROTO ? EPROTO : ECONNRESET;
    return fail(err, with_errno("waiting for remote command failed", err), ec.message());
  }
  if (status != proto::Status::kSuccess)
    return fail(proto::status_to_errno(status), "remote command failed",
                proto::status_message(status));
  return 0;
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

}  // namespace

Pool::Pool(Settings settings, std::unique_ptr<ControlChannel> channel, const uint8_t *base,
           size_t size)
    : settings_(std::move(settings)), channel_(std::move(channel)), base_(base), size_(size) {}

Pool::~Pool() { stop_keepalive(); }

// How long close() of a lost pool waits for the channel to end (ssh to
// exit, TLS to shut down) before it lets go of it.
constexpr std::chrono::milliseconds kLostCloseWait{200};

// rpmemd ends a session whose keepalives stop for its peer-timeout (at
// least 10 s).
constexpr std::chrono::seconds kKeepaliveInterval{3};

void Pool::start_keepalive(bool send_keepalives) {
  const int watched = channel_->hangup_fd();
  if (!send_keepalives && watched < 0) return;
  keepalive_stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (keepalive_stop_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  // A copy of the descriptor: the channel may close its own on a timeout,
  // and the number must not name another file while it is watched.
  const int hangup = watched >= 0 ? ::fcntl(watched, F_DUPFD_CLOEXEC, 0) : -1;
  try {
    keepalive_ = std::thread([this, hangup, send_keepalives] {
      int watched_fd = hangup;
      watch_channel(watched_fd, send_keepalives);  // may replace it (reopen)
      if (watched_fd >= 0) ::close(watched_fd);
    });
  } catch (...) {
    if (hangup >= 0) ::close(hangup);
    ::close(keepalive_stop_fd_);
    keepalive_stop_fd_ = -1;
    throw;
  }
}

void Pool::watch_channel(int &hangup, bool send_keepalives) noexcept {
  const bool keepalives = send_keepalives;
  // The first keepalive at once: from then on the daemon expects them.
  for (;;) {
    if (send_keepalives) {
      std::lock_guard lock(control_mu_);
      if (auto ec = channel_->send(proto::encode_keepalive(), settings_.control_timeout())) {
        RPMEM_LOG_WARN("keepalive: %s", ec.message().c_str());
        send_keepalives = false;  // the channel is gone; still watched for its end
        if (hangup < 0) return;
      }
    }
    pollfd p[2] = {{keepalive_stop_fd_, POLLIN, 0}, {hangup, POLLRDHUP, 0}};
    const int rc = ::poll(p, hangup >= 0 ? 2 : 1,
                          static_cast<int>(std::chrono::milliseconds(kKeepaliveInterval).count()));
    if (rc < 0 && errno != EINTR) return;
    if (rc <= 0) continue;
    if (p[0].revents) return;  // stop
    if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      if (reopen_) {  // a service: it may be restarting
        if (reopen(hangup)) {
          send_keepalives = keepalives;
          continue;
        }
        return;
      }
      // PMDK's words for it in rpmem_errormsg(); the detail in the log.
      RPMEM_LOG_ERR("the target's rpmemd ended the session (its control channel closed)");
      lose(strerror(ECONNRESET));
      return;
    }
  }
}

bool Pool::stop_requested() const noexcept {
  pollfd p{keepalive_stop_fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// One attempt at reopening, within `left`: the new channel and its answer,
// or why not (`fatal`: no later attempt can do better).
struct ReopenTry {
  std::unique_ptr<ControlChannel> channel;
  proto::PoolResponse resp;
  std::string why;
  bool fatal = false;
};

namespace {

ReopenTry reopen_once(const TargetAddress &target, const Settings &settings,
                      const proto::PoolRequest &req, std::chrono::milliseconds left) {
  ReopenTry t;
  const auto step = std::min<std::chrono::milliseconds>(left, std::chrono::seconds(2));
  auto tls = TlsChannel::connect(target, settings, step);
  if (!tls) {
    t.why = tls.error().message;
    return t;
  }
  auto &ch = *tls.value();
  proto::Bytes payload;
  std::optional<proto::Hello> hello;
  if (auto ec = ch.recv(MsgType::kHello, payload, step)) {
    t.why = "no hello: " + ec.message();
    return t;
  }
  if (!(hello = proto::decode_hello(payload)) || hello->status != 0) {
    t.why = "the service refused the connection";
    return t;
  }
  if (hello->major != proto::kMajor || hello->minor < proto::kMinorResume) {
    t.why = "the restarted service cannot reopen pools (protocol " + std::to_string(hello->major) +
            "." + std::to_string(hello->minor) + ")";
    t.fatal = true;
    return t;
  }
  std::optional<proto::PoolResponse> resp;
  if (auto ec = ch.send(proto::encode(MsgType::kOpen, req), step)) {
    t.why = "sending the open request: " + ec.message();
    return t;
  }
  if (auto ec = ch.recv(MsgType::kPoolResp, payload, left)) {
    t.why = "no answer to the open request: " + ec.message();
    return t;
  }
  if (!(resp = proto::decode_pool_response(payload))) {
    t.why = "invalid response from the target";
    t.fatal = true;
    return t;
  }
  t.resp = std::move(*resp);
  t.channel = std::move(tls.value());
  return t;
}

}  // namespace

bool Pool::reopen(int &hangup) noexcept try {
  using Clock = std::chrono::steady_clock;
  Reopen &r = *reopen_;
  const auto start = Clock::now();
  const auto deadline = start + settings_.timeout;
  RPMEM_LOG_WARN("%s: the service ended the session; opening pool '%s' again",
                 r.target.host.c_str(), r.request.pool_set.c_str());
  std::string why = "no answer";
  bool fatal = false;
  for (;;) {
    if (stop_requested()) return false;
    const auto now = Clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    if (left.count() <= 0) break;
    std::copy(r.token.begin(), r.token.end(), r.request.token.begin());
    ReopenTry t = reopen_once(r.target, settings_, r.request, left);
    if (t.channel) {
      const proto::PoolResponse &resp = t.resp;
      if (resp.status != proto::Status::kSuccess) {
        why = resp.status == proto::Status::kStale
                  ? "the pool was opened by another session while the service restarted"
                  : std::string("the restarted service refused to reopen the pool: ") +
                        proto::status_message(resp.status);
        fatal = true;
        break;
      }
      const bool headers = (resp.pool_flags & proto::kPoolHasHeaders) != 0;
      PoolAttr known;
      {
        std::lock_guard lock(control_mu_);  // set_attr() changes it
        known = r.attr;
      }
      const char *other = nullptr;
      if (resp.nlanes != lanes_.size())
        other = "the service grants it another number of lanes";
      else if (resp.transport != proto::TransportKind::kTcp)
        other = "the service serves it over another transport";
      else if (headers != has_headers_ || (headers && !(resp.attr == known)))
        other = "it is not the same pool (its attributes differ)";
      else if ((resp.lane_flags & proto::kLaneFlags) != r.lane_flags)
        other = "the service secures its lanes another way";
      else if (resp.token.size() != proto::kTokenSize)
        other = "the service gave no session token";
      transport::LaneRoute::Where where{resp.port, resp.secret, {}};
      if (!other && (r.lane_flags & proto::kLaneSealed) &&
          !t.channel->export_keying_material(where.master.data(), where.master.size(),
                                             transport::tcp::kSealExporterLabel, resp.secret.data(),
                                             resp.secret.size()))
        other = "its sealed lanes cannot be keyed";
      if (other) {
        proto::CloseRequest close{0};
        proto::Bytes ignored;
        if (!t.channel->send(proto::encode(close), std::chrono::seconds(1)))
          t.channel->recv(MsgType::kCloseResp, ignored, std::chrono::seconds(1));
        t.channel->close(std::chrono::milliseconds(200));
        why = std::string("the reopened pool cannot take the session's place: ") + other;
        fatal = true;
        break;
      }
      r.token = resp.token;
      r.route->set(where);
      OPENSSL_cleanse(where.master.data(), where.master.size());
      const int fd = t.channel->hangup_fd();
      {
        std::lock_guard lock(control_mu_);
        channel_->close(std::chrono::milliseconds(0));
        channel_ = std::move(t.channel);
      }
      if (hangup >= 0) ::close(hangup);
      hangup = fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
      RPMEM_LOG_NOTICE(
          "%s: pool '%s' reopened after %lld ms, the service having restarted",
          r.target.host.c_str(), r.request.pool_set.c_str(),
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()));
      return true;
    }
    why = t.why;
    if (t.fatal) {
      fatal = true;
      break;
    }
    // A refusal comes at once (the service not listening yet): the next
    // try a little later.
    const auto next = now + std::chrono::milliseconds(200);
    pollfd p{keepalive_stop_fd_, POLLIN, 0};
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    if (wait.count() > 0 && ::poll(&p, 1, static_cast<int>(wait.count())) == 1) return false;
  }
  if (!fatal) {
    RPMEM_LOG_ERR("the service did not come back (last try: %s)", why.c_str());
    why = no_answer_text(settings_.timeout) + " (the service did not come back)";
  }
  lose(why);
  return false;
} catch (...) {
  lose("out of memory while reopening the pool");
  return false;
}

void Pool::stop_keepalive() noexcept {
  if (keepalive_stop_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(keepalive_stop_fd_, &one, sizeof(one));
  if (keepalive_.joinable()) keepalive_.join();
  ::close(keepalive_stop_fd_);
  keepalive_stop_fd_ = -1;
}

void Pool::lose(const std::string &why) noexcept {
  int expected = 0;
  if (!error_.compare_exchange_strong(expected, ECONNRESET)) return;
  try {
    std::lock_guard lock(lost_mu_);
    lost_why_ = why;
  } catch (...) {
  }
  RPMEM_LOG_ERR("target lost: %s", why.c_str());
  // Calls blocked on other lanes return now, not at their bound.
  for (auto &l : lanes_) l->shutdown();
}

std::string Pool::lost_why() const {
  std::lock_guard lock(lost_mu_);
  return lost_why_.empty() ? strerror(ECONNRESET) : lost_why_;
}

namespace {

// The target, or EINVAL with its message: PMDK's text for one that does not
// parse (the detail in the log), ours, naming the problem, for one that
// parses but may not reach ssh (a user or host beginning with '-', holding
// whitespace or a control character: PMDK passed those on).
Result<TargetAddress> checked_target(const std::string &text) {
  auto syntax = split_target(text);
  if (!syntax) {
    fail(EINVAL, with_errno("parsing target node address failed", EINVAL), syntax.error().message);
    return syntax;
  }
  auto target = parse_target(text);
  if (!target) {
    RPMEM_LOG_ERR("%s", target.error().message.c_str());
    set_errormsg(target.error().message);
  }
  return target;
}

}  // namespace

int Pool::connect(const PoolArgs &args, std::unique_ptr<Pool> &out, unsigned &nlanes,
                  PoolAttr *open_attr) noexcept try {
  init_logging_once();
  auto target = checked_target(args.target);
  if (!target) return EINVAL;
  Settings settings = Settings::from_env();
  uint32_t transports = client_transports(settings);
  if (!transports) return fail(ENOMEDIUM, "cannot find provider");

  std::unique_ptr<ControlChannel> channel;
  if (target->service) {
    auto tls = TlsChannel::connect(*target, settings);
    if (!tls)
      return fail(tls.error().code.value(),
                  "out-of-band connection failed: " + tls.error().message);
    channel = std::move(tls.value());
  } else {
    auto spawned = SshChannel::spawn(settings, *target, settings.next_cmd(), {});
    if (!spawned) {
      int err = spawned.error().code.value();
      return fail(err, with_errno("out-of-band connection failed", err), spawned.error().message);
    }
    channel = std::move(spawned.value());
  }
  auto &ch = *channel;
  const auto ctl_timeout = settings.control_timeout();

  proto::Bytes payload;
  if (auto ec = ch.recv(MsgType::kHello, payload, ctl_timeout))
    return oob_failure(ec, ch, ctl_timeout);
  auto hello = proto::decode_hello(payload);
  if (!hello) return oob_failure(errc(EPROTO), ch, ctl_timeout);
  if (hello->status != 0) {
    int err = hello->status < 4096 ? static_cast<int>(hello->status) : EPROTO;
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

  proto::PoolRequest req;
  if (settings.data_tls) req.lane_flags = proto::kLaneTls;
  if (settings.data_seal && hello->minor >= proto::kMinorSealed)
    req.lane_flags |= proto::kLaneSealed;  // can seal, should the lanes be encrypted
  req.nlanes = std::min(args.nlanes, settings.max_nlanes);
  req.pool_size = args.size;
  req.transports = transports & hello->transports;
  req.pool_set = args.pool_set;
  if (args.create) req.attr = args.create_attr;
  req.extended = hello->minor >= proto::kMinorResume;  // it takes the reopen extension
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
  const bool lane_tls = (resp->lane_flags & proto::kLaneTls) != 0;
  const bool sealed = lane_tls && (resp->lane_flags & proto::kLaneSealed) != 0;
  RPMEM_LOG_NOTICE("%s: pool '%s' %s, %u lanes, transport %s%s (accepted:%s%s, offered:%s%s)",
                   args.target.c_str(), args.pool_set.c_str(), args.create ? "created" : "opened",
                   resp->nlanes, resp->transport == proto::TransportKind::kTcp ? "tcp" : "verbs",
                   resp->transport == proto::TransportKind::kVerbs
                       ? (resp->method == proto::PersistMethod::kApm ? " APM" : " GPSPM")
                   : sealed   ? " sealed"
                   : lane_tls ? " in TLS"
                              : "",
                   (transports & verbs_bit) ? " verbs" : "", (transports & tcp_bit) ? " tcp" : "",
                   (hello->transports & verbs_bit) ? " verbs" : "",
                   (hello->transports & tcp_bit) ? " tcp" : "");

  std::unique_ptr<Pool> pool(new Pool(std::move(settings), std::move(channel),
                                      static_cast<const uint8_t *>(args.addr), args.size));
  pool->has_headers_ = (resp->pool_flags & proto::kPoolHasHeaders) != 0;

  transport::InitiatorParams params;
  params.host = target->host;
  params.port = resp->port;
  params.secret = resp->secret;
  params.nlanes = resp->nlanes;
  params.local_base = pool->base_;
  params.pool_size = args.size;
  params.timeout = pool->settings_.timeout;
  params.provider_data = resp->provider_data;
  params.work_queue_size = pool->settings_.work_queue_size;
  params.comeback = hello->minor >= proto::kMinorResume;
  if (params.comeback && target->service && resp->transport == proto::TransportKind::kTcp)
    params.route = std::make_shared<transport::LaneRoute>(
        transport::LaneRoute::Where{resp->port, resp->secret, {}});
  Result<std::vector<std::unique_ptr<transport::InitiatorLane>>> lanes =
      Error{errc(EPROTO), "the target did not put the data lanes inside TLS (RPMEM_DATA_TLS=1)"};
  if (lane_tls && resp->transport != proto::TransportKind::kTcp) {
    lanes = Error{errc(EPROTO), "TLS data lanes over a transport other than tcp"};
  } else if (sealed && !(req.lane_flags & proto::kLaneSealed)) {
    lanes =
        Error{errc(EPROTO), "the target sealed the data lanes, which this client did not offer"};
  } else if (sealed) {
    params.seal.on = true;
    bool keyed = false;
    if (target->service) {  // bound to the control channel's TLS session
      keyed = resp->lane_psk.empty() &&
              pool->channel_->export_keying_material(
                  params.seal.master.data(), params.seal.master.size(),
                  transport::tcp::kSealExporterLabel, resp->secret.data(), resp->secret.size());
    } else if (resp->lane_psk.size() == params.seal.master.size()) {  // from the ssh channel
      std::copy(resp->lane_psk.begin(), resp->lane_psk.end(), params.seal.master.begin());
      keyed = true;
    }
    if (keyed && params.route)
      params.route->set(transport::LaneRoute::Where{resp->port, resp->secret, params.seal.master});
    if (keyed)
      lanes = transport::connect_lanes(resp->transport, params);
    else
      lanes = Error{errc(EPROTO), "sealed data lanes without a usable key"};
  } else if (lane_tls && target->service) {  // the control channel's certificates
    auto ctx = lane_tls_context(pool->settings_);
    if (ctx) {
      params.tls.ctx = std::move(ctx.value());
      params.tls.server_name = target->host;
      lanes = transport::connect_lanes(resp->transport, params);
    } else {
      lanes = ctx.error();
    }
  } else if (lane_tls) {  // the session's key, from the ssh channel
    std::string why;
    if (!resp->lane_psk.empty())
      params.tls.ctx = transport::tcp::make_psk_context(false, resp->lane_psk, why);
    if (params.tls.ctx)
      lanes = transport::connect_lanes(resp->transport, params);
    else
      lanes = Error{errc(EPROTO), "TLS data lanes without a usable key: " + why};
  } else if (!pool->settings_.data_tls) {
    lanes = transport::connect_lanes(resp->transport, params);
  }
  if (!lanes) {
    // Let the target undo what it did (a created pool is removed).
    proto::CloseRequest close{args.create ? proto::kCloseRemove : 0};
    if (!pool->channel_->send(proto::encode(close), ctl_timeout))
      pool->channel_->recv(MsgType::kCloseResp, payload, ctl_timeout);
    int err = lanes.error().code.value();
    return fail(err, with_errno("establishing in-band connection failed", err),
                lanes.error().message);
  }
  pool->lanes_ = std::move(lanes.value());
  // A service that gave a token takes the pool back after a restart.
  if (target->service && resp->transport == proto::TransportKind::kTcp &&
      resp->token.size() == proto::kTokenSize && params.route) {
    auto r = std::make_unique<Reopen>();
    r->target = *target;
    r->request = req;
    r->request.nlanes = resp->nlanes;
    r->request.transports = tcp_bit;  // its lanes are tcp lanes
    r->request.extended = true;
    r->request.reopen = true;
    r->request.attr = PoolAttr{};
    r->token = resp->token;
    r->attr = args.create ? args.create_attr : resp->attr;
    r->lane_flags = resp->lane_flags & proto::kLaneFlags;
    r->route = params.route;
    pool->reopen_ = std::move(r);
  }
  try {
    pool->start_keepalive(hello->minor >= proto::kMinorKeepalive);
  } catch (const std::system_error &e) {  // the session works without
    RPMEM_LOG_WARN("no keepalive thread: %s", e.what());
  }
  nlanes = resp->nlanes;
  if (open_attr && !args.create) *open_attr = resp->attr;
  out = std::move(pool);
  return 0;
} catch (const std::bad_alloc &) {
  return fail(ENOMEM, "out of memory");
} catch (const std::exception &e) {
  return fail(EREMOTEIO, e.what());
}

int Pool::check(size_t offset, size_t length, unsigned lane, bool guard_header) noexcept {
  if (guard_header && has_headers_ && offset < kPoolHdrSize && length > 0) {
    set_errormsg("offset (%zu) in pool is less than %zu bytes", offset, kPoolHdrSize);
    return EINVAL;
  }
  if (int err = error_.load(std::memory_order_relaxed)) {
    set_errormsg("connection lost: %s", lost_why().c_str());
    return err;
  }
  if (lane >= lanes_.size()) {
    set_errormsg("invalid lane number (%u), pool has %zu lanes", lane, lanes_.size());
    return EINVAL;
  }
  if (offset > size_ || length > size_ - offset) {
    set_errormsg("offset (%zu) + length (%zu) exceeds pool size (%zu)", offset, length, size_);
    return EINVAL;
  }
  return 0;
}

int Pool::lane_result(std::error_code ec, const char *op, unsigned lane) noexcept {
  if (!ec) return 0;
  int err = ec.value();
  if (err == ECONNRESET || err == EPROTO) {
    // The target is gone for good (the lane rode out what it could): fail
    // every lane now, so that calls blocked on other lanes return too, and
    // every later call fails fast.
    std::string why;
    try {
      why = lanes_[lane]->failure();
    } catch (...) {
    }
    if (why.empty()) why = strerror(err);
    lose(why);
    set_errormsg("%s operation failed: %s", op, lost_why().c_str());
    return ECONNRESET;
  }
  set_errormsg("%s operation failed: %s", op, strerror(err));
  return err;
}

int Pool::persist(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept {
  if (flags & ~1u) {
    set_errormsg("invalid flags (0x%x)", flags);
    return EINVAL;
  }
  if (int err = check(offset, length, lane, true)) return err;
  if (length == 0) return 0;
  return lane_result(lanes_[lane]->write(transport::DataOp::kPersist, offset, length, flags != 0),
                     "persist", lane);
}

// PMDK's deep_persist and read had one text for every failure after the
// header check: "persist operation failed" and "read operation failed: ...".
// What went wrong is in the library's log.
int Pool::deep_persist(size_t offset, size_t length, unsigned lane) noexcept {
  if (error_.load(std::memory_order_relaxed) || (has_headers_ && offset < kPoolHdrSize && length))
    return check(offset, length, lane, true);  // the header, or a lost connection
  int err = check(offset, length, lane, false);
  if (err == 0 && length > 0)
    err = lane_result(lanes_[lane]->write(transport::DataOp::kDeepPersist, offset, length, false),
                      "persist", lane);
  if (err != 0) set_errormsg("persist operation failed");
  return err;
}

int Pool::flush(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept {
  if (flags & ~1u) {
    set_errormsg("invalid flags (0x%x)", flags);
    return EINVAL;
  }
  if (int err = check(offset, length, lane, true)) return err;
  if (length == 0) return 0;
  return lane_result(lanes_[lane]->write(transport::DataOp::kFlush, offset, length, flags != 0),
                     "flush", lane);
}

int Pool::drain(unsigned lane, unsigned flags) noexcept {
  if (flags != 0) {
    set_errormsg("invalid flags (0x%x)", flags);
    return EINVAL;
  }
  if (int err = check(0, 0, lane, false)) return err;
  return lane_result(lanes_[lane]->drain(), "drain", lane);
}

int Pool::read(void *buf, size_t offset, size_t length, unsigned lane) noexcept {
  if (error_.load(std::memory_order_relaxed)) return check(offset, length, lane, false);
  int err = check(offset, length, lane, false);
  if (err == 0 && length > 0)
    err = lane_result(lanes_[lane]->read(buf, offset, length), "read", lane);
  if (err == ECONNRESET)
    set_errormsg("read operation failed: %s", lost_why().c_str());
  else if (err != 0)
    set_errormsg("read operation failed: %s", strerror(err));
  return err;
}

int Pool::set_attr(const PoolAttr *attr) noexcept try {
  if (int err = error_.load()) {
    set_errormsg("connection lost: %s", lost_why().c_str());
    return err;
  }
  std::lock_guard lock(control_mu_);
  proto::SetAttrRequest req;
  if (attr) req.attr = *attr;
  proto::Status status = proto::Status::kSuccess;
  if (auto ec = status_exchange(*channel_, proto::encode(req), MsgType::kSetAttrResp,
                                settings_.control_timeout(), status)) {
    set_errormsg("receiving set attributes request response failed: %s", strerror(ec.value()));
    return ec.value();
  }
  if (status != proto::Status::kSuccess) {
    set_errormsg("%s", proto::status_message(status));
    return proto::status_to_errno(status);
  }
  if (reopen_) reopen_->attr = req.attr;  // what a reopen must find
  return 0;
} catch (...) {
  set_errormsg("set attributes request failed: out of memory");
  return ENOMEM;
}

int Pool::close() noexcept try {
  stop_keepalive();
  std::lock_guard lock(control_mu_);
  lanes_.clear();  // closes every data connection
  if (error_.load()) {
    // The target is lost: nobody would answer a close request. rpmemd ends
    // the session on its own (the control channel's end, or its
    // peer-timeout); what was acknowledged is durable there.
    channel_->close(kLostCloseWait);
    set_errormsg("close request failed: %s", lost_why().c_str());
    return ECONNRESET;
  }
  const auto timeout = settings_.control_timeout();
  proto::Status status = proto::Status::kSuccess;
  std::error_code ec = status_exchange(*channel_, proto::encode(proto::CloseRequest{0}),
                                       MsgType::kCloseResp, timeout, status);
  channel_->close(timeout);
  if (ec) {
    set_errormsg("close request failed: %s", strerror(ec.value()));
    return ec.value();
  }
  if (status != proto::Status::kSuccess) {
    RPMEM_LOG_ERR("%s", proto::status_message(status));
    set_errormsg("close request failed: %s", strerror(proto::status_to_errno(status)));
    return proto::status_to_errno(status);
  }
  return 0;
} catch (...) {
  set_errormsg("close request failed: %s", strerror(ENOMEM));
  return ENOMEM;
}

int Pool::remove(const std::string &target_str, const std::string &pool_set, int flags) noexcept
    try {
  init_logging_once();
  auto target = checked_target(target_str);
  if (!target) return EINVAL;
  Settings settings = Settings::from_env();
  if (target->service) return remove_from_service(*target, settings, pool_set, flags);
  std::vector<std::string> args{"--remove", pool_set};
  if (flags & 0x1) args.emplace_back("--force");
  if (flags & 0x2) args.emplace_back("--pool-set");
  auto spawned = SshChannel::spawn(settings, *target, settings.next_cmd(), args);
  if (!spawned) {
    int err = spawned.error().code.value();
    return fail(err, with_errno("executing ssh command failed", err), spawned.error().message);
  }
  auto &ch = *spawned.value();
  auto ec = ch.wait_eof(settings.control_timeout());
  if (ec) {
    ch.close_and_wait(settings.control_timeout());
    int err = ec.value() == EPROTO ? EPROTO : ETIMEDOUT;
    return fail(err, with_errno("waiting for remote command failed", err), ec.message());
  }
  int status = ch.close_and_wait(settings.control_timeout());
  if (status == -1 || !WIFEXITED(status))
    return fail(ECONNRESET, "remote command failed", "the remote command did not exit normally");
  if (int code = WEXITSTATUS(status))
    return fail(code, "remote command failed",
                "exit status " + std::to_string(code) + ": " + ch.stderr_line());
  return 0;
} catch (...) {
  return fail(ENOMEM, "out of memory");
}

}  // namespace rpmem
