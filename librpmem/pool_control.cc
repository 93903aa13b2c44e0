// SPDX-License-Identifier: BSD-3-Clause
// Pool's control requests after the pool is open: set_attr and close; and
// remove (rpmem_remove), over ssh or to a service.
#include "common/log.h"
#include "librpmem/errormsg.h"
#include "librpmem/pool.h"
#include "librpmem/pool_detail.h"
#include "librpmem/ssh_channel.h"
#include "librpmem/tls_channel.h"

#include <sys/wait.h>

#include <cstring>

namespace rpmem {

namespace pool_detail {

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

std::error_code status_exchange(ControlChannel &ch, const proto::Bytes &request,
                                proto::MsgType reply_type, std::chrono::milliseconds timeout,
                                proto::Status &status) {
  proto::Bytes payload;
  std::error_code ec = ch.send(request, timeout);
  if (!ec) ec = ch.recv(reply_type, payload, timeout);
  if (ec) return errc(ec.value() == EPROTO ? EPROTO : ECONNRESET);
  auto resp = proto::decode_status_response(payload);
  if (!resp) return errc(EPROTO);
  status = resp->status;
  return {};
}

void end_session(ControlChannel &ch, bool create, std::chrono::milliseconds timeout) {
  proto::CloseRequest close{create ? proto::kCloseRemove : 0};
  proto::Bytes payload;
  if (!ch.send(proto::encode(close), timeout))
    ch.recv(proto::MsgType::kCloseResp, payload, timeout);
}

}  // namespace pool_detail

using pool_detail::checked_target;
using pool_detail::fail;
using pool_detail::status_exchange;
using pool_detail::with_errno;
using proto::MsgType;

namespace {

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
    return fail(wire::errno_of(hello->status), "remote command failed",
                strerror(static_cast<int>(hello->status)));
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

}  // namespace

// How long close() of a lost pool waits for the channel to end (ssh to
// exit, TLS to shut down) before it lets go of it.
constexpr std::chrono::milliseconds kLostCloseWait{200};

int Pool::set_attr(const PoolAttr *attr) noexcept try {
  int err = 0;
  if (life_.admit(PoolCall::kSetAttr, err) == Admit::kRefuse) return err;
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
  if (ahead_) ahead_->attr = req.attr;    // ... and a reattach
  return 0;
} catch (...) {
  set_errormsg("set attributes request failed: out of memory");
  return ENOMEM;
}

int Pool::close() noexcept try {
  stop_keepalive();
  const PoolState s = life_.state();
  if (ahead_ && (s == PoolState::kBehind || s == PoolState::kCatchingUp)) return close_ahead();
  std::lock_guard lock(control_mu_);
  lanes_.clear();  // closes every data connection
  if (int err = 0; life_.admit(PoolCall::kClose, err) == Admit::kRefuse) {
    // The target is lost: nobody would answer a close request. rpmemd ends
    // the session on its own (the control channel's end, or its
    // peer-timeout); what was acknowledged is durable there.
    life_.close();
    channel_->close(kLostCloseWait);
    return err;
  }
  life_.close();
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
  // In sync and closed: the target no longer marks the pool, nor does this
  // client keep a record of it.
  if (ahead_) ahead_->record.remove();
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
