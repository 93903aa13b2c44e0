// SPDX-License-Identifier: BSD-3-Clause
// Pool's life beside the data path: the keepalive thread that watches the
// control channel, reopening the pool on a restarted service (the lanes then
// come back to the new session), and the pool's loss (sticky).
#include "common/log.h"
#include "common/text.h"
#include "common/transport/tcp/sealed_stream.h"
#include "librpmem/pool.h"
#include "librpmem/tls_channel.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

namespace rpmem {

using proto::MsgType;

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
  proto::PoolRequest sent = req;
  sent.leveled = req.leveled && hello->minor >= proto::kMinorLevels;
  if (auto ec = ch.send(proto::encode(MsgType::kOpen, sent), step)) {
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

// Puts the reopened session (`t`, its channel open) in the old one's
// place: the lanes' new route, the new channel, `hangup` its descriptor.
// False with `why` when the pool it opened cannot take the place (then its
// channel is closed again).
bool Pool::take_reopened(ReopenTry &t, int &hangup, std::string &why) {
  Reopen &r = *reopen_;
  const proto::PoolResponse &resp = t.resp;
  if (resp.status != proto::Status::kSuccess) {
    why = resp.status == proto::Status::kStale
              ? "the pool was opened by another session while the service restarted (or its files "
                "were made anew)"
              : std::string("the restarted service refused to reopen the pool: ") +
                    proto::status_message(resp.status);
    return false;
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
  else if (resp.transport != r.transport)
    other = "the service serves it over another transport";
  else if (headers != has_headers_ || (headers && !(resp.attr == known)))
    other = "it is not the same pool (its attributes differ)";
  else if ((resp.lane_flags & proto::kLaneFlags) != r.lane_flags)
    other = "the service secures its lanes another way";
  else if (resp.token.size() != proto::kTokenSize)
    other = "the service gave no session token";
  transport::LaneRoute::Where where{resp.port, resp.secret, {}, resp.provider_data};
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
    return false;
  }
  r.token = resp.token;
  // A service that no longer grants the visible level: every call is
  // persistent from now on (a stronger promise, never a weaker one).
  if ((resp.levels & proto::level_bit(proto::Durability::kVisible)) == 0)
    visible_granted_.store(false);
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
  return true;
}

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
    if (t.channel && t.resp.status == proto::Status::kBusy) {
      // A session of the restarted service that took the pool (a reopen
      // whose answer was lost) still holds it, until it sees that its
      // client is gone: the next try a little later.
      t.channel->close(std::chrono::milliseconds(200));
      t.channel.reset();
      t.why = "the pool is busy (an earlier try still holds it)";
    }
    if (t.channel) {
      if (!take_reopened(t, hangup, why)) {
        fatal = true;
        break;
      }
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

}  // namespace rpmem
