// SPDX-License-Identifier: BSD-3-Clause
// Pool's life beside the data path: the keepalive thread that watches the
// control channel, and the pool coming back when the service that serves
// it restarted (reopened through the same handshake as the first open, its
// lanes pointed at the new session) or lost when it cannot.
#include "common/log.h"
#include "common/text.h"
#include "common/transport/tcp/sealed_stream.h"
#include "librpmem/errormsg.h"
#include "librpmem/pool.h"

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
// A reopen's tries: each step of one within this, and the next try this
// long after one that failed at once (the service not listening yet).
constexpr std::chrono::seconds kReopenStep{2};
constexpr std::chrono::milliseconds kReopenPause{200};

void Pool::start_keepalive(bool send_keepalives) noexcept try {
  const int watched = channel_->hangup_fd();
  if (!send_keepalives && watched < 0 && !ahead_) return;
  keepalive_stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (keepalive_stop_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  if (ahead_) wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // none: it looks every 500 ms
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
    if (wake_fd_ >= 0) ::close(wake_fd_);
    wake_fd_ = -1;
    throw;
  }
} catch (const std::exception &e) {  // the session works without (but never catches up)
  RPMEM_LOG_WARN("no keepalive thread: %s", e.what());
}

void Pool::watch_channel(int &hangup, bool send_keepalives) noexcept {
  const bool keepalives = send_keepalives;
  // The first keepalive at once: from then on the daemon expects them.
  for (;;) {
    // A pool behind its target reattaches (a new channel: its keepalives
    // again) and catches up here.
    if (ahead_ && life_.state() == PoolState::kBehind) {
      if (!ahead_->attached.load()) {
        if (!behind_turn(hangup)) return;
        if (ahead_->attached.load()) send_keepalives = keepalives;
        continue;
      }
      if (ahead_->armed.load() && !catch_up() && stop_requested()) return;
    }
    if (send_keepalives) {
      std::lock_guard lock(control_mu_);
      if (auto ec = channel_->send(proto::encode_keepalive(), settings_.control_timeout())) {
        RPMEM_LOG_WARN("keepalive: %s", ec.message().c_str());
        send_keepalives = false;  // the channel is gone; still watched for its end
        if (hangup < 0 && !ahead_) return;
      }
    }
    // Behind (opened so, waiting for a write), the thread looks often.
    const auto interval = ahead_ && life_.state() == PoolState::kBehind
                              ? std::chrono::milliseconds(500)
                              : std::chrono::milliseconds(kKeepaliveInterval);
    // (poll skips a descriptor of -1.)
    pollfd p[3] = {{keepalive_stop_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {hangup, POLLRDHUP, 0}};
    const int rc = ::poll(p, 3, static_cast<int>(interval.count()));
    if (rc < 0 && errno != EINTR) return;
    if (rc <= 0) continue;
    if (p[0].revents) return;  // stop
    if (p[1].revents) drain_wake();
    if (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      if (ahead_ && life_.state() == PoolState::kBehind) {
        // Opened behind, its session ended before anything was sent: the
        // next write reattaches.
        ahead_->attached.store(false);
        ahead_->old_channel.store(true);
        lanes_.shutdown_all();
        continue;
      }
      if (reopen_) {  // a service: it may be restarting
        if (reopen(hangup)) {
          send_keepalives = keepalives;
          continue;
        }
        if (ahead_ && life_.state() == PoolState::kBehind) continue;
        return;
      }
      // PMDK's words for it in rpmem_errormsg(); the detail in the log.
      RPMEM_LOG_ERR("the target's rpmemd ended the session (its control channel closed)");
      life_.lose(strerror(ECONNRESET));
      if (ahead_ && life_.state() == PoolState::kBehind) continue;
      return;
    }
  }
}

bool Pool::stop_requested() const noexcept { return !pause(std::chrono::milliseconds(0)); }

bool Pool::pause(std::chrono::milliseconds d) const noexcept {
  pollfd p[2] = {{keepalive_stop_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  if (::poll(p, 2, static_cast<int>(d.count())) <= 0) return true;
  if (p[0].revents) return false;
  drain_wake();
  return true;
}

void Pool::wake() noexcept {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) [[maybe_unused]]
    auto n = ::write(wake_fd_, &one, sizeof(one));
}

void Pool::drain_wake() const noexcept {
  uint64_t n = 0;
  if (wake_fd_ >= 0) [[maybe_unused]]
    auto r = ::read(wake_fd_, &n, sizeof(n));
}

int Pool::reopen_once(Handshake &hs, std::chrono::milliseconds left, bool &fatal) {
  Reopen &r = *reopen_;
  HandshakeArgs ha;
  ha.target = r.target;
  ha.transports = r.request.transports;
  ha.step = std::min<std::chrono::milliseconds>(left, kReopenStep);
  ha.answer = left;
  std::copy(r.token.begin(), r.token.end(), r.request.token.begin());
  ha.request = [&](const proto::Hello &hello, proto::PoolRequest &req) {
    if (hello.minor < proto::kMinorResume) {
      fatal = true;
      set_errormsg("the restarted service cannot reopen pools (protocol %u.%u)", hello.major,
                   hello.minor);
      return EPROTONOSUPPORT;
    }
    req = r.request;
    req.leveled = r.request.leveled && hello.minor >= proto::kMinorLevels;
    req.ahead = r.request.ahead && req.leveled && hello.minor >= proto::kMinorRunAhead;
    return 0;
  };
  const int err = handshake(connector_, settings_, ha, hs);
  if (err == EPROTO || err == ENOMEDIUM) fatal = true;  // an answer no try does better
  return err;
}

// Puts the reopened session (`hs`, its channel open) in the old one's
// place: the lanes' new route, the new channel, `hangup` its descriptor.
// False with `why` when the pool it opened cannot take the place (then its
// channel is closed again).
bool Pool::take_reopened(Handshake &hs, int &hangup, std::string &why) {
  Reopen &r = *reopen_;
  const proto::PoolResponse &resp = hs.response;
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
      !hs.channel->export_keying_material(where.master.data(), where.master.size(),
                                          transport::tcp::kSealExporterLabel, resp.secret.data(),
                                          resp.secret.size()))
    other = "its sealed lanes cannot be keyed";
  if (other) {
    proto::CloseRequest close{0};
    proto::Bytes ignored;
    if (!hs.channel->send(proto::encode(close), std::chrono::seconds(1)))
      hs.channel->recv(MsgType::kCloseResp, ignored, std::chrono::seconds(1));
    hs.channel->close(std::chrono::milliseconds(200));
    why = std::string("the reopened pool cannot take the session's place: ") + other;
    return false;
  }
  r.token = resp.token;
  if (ahead_) {
    std::lock_guard lock(ahead_->mu);
    std::copy(resp.token.begin(), resp.token.end(), ahead_->rec.token.begin());
  }
  // A service that no longer grants the visible level: every call is
  // persistent from now on (a stronger promise, never a weaker one).
  if ((resp.levels & proto::level_bit(proto::Durability::kVisible)) == 0)
    visible_granted_.store(false);
  r.route->set(where);
  OPENSSL_cleanse(where.master.data(), where.master.size());
  const int fd = hs.channel->hangup_fd();
  {
    std::lock_guard lock(control_mu_);
    channel_->close(std::chrono::milliseconds(0));
    channel_ = std::move(hs.channel);
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
  life_.coming_back();
  RPMEM_LOG_WARN("%s: the service ended the session; opening pool '%s' again",
                 r.target.host.c_str(), r.request.pool_set.c_str());
  std::string why = "no answer";
  bool fatal = false;
  for (;;) {
    if (stop_requested()) return false;
    const auto now = Clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    if (left.count() <= 0) break;
    Handshake hs;
    const int err = reopen_once(hs, left, fatal);
    if (!err && hs.response.status == proto::Status::kBusy) {
      // A session of the restarted service that took the pool (a reopen
      // whose answer was lost) still holds it, until it sees that its
      // client is gone: the next try a little later.
      hs.channel->close(std::chrono::milliseconds(200));
      why = "the pool is busy (an earlier try still holds it)";
    } else if (!err) {
      if (!take_reopened(hs, hangup, why)) {
        fatal = true;
        break;
      }
      life_.back();
      RPMEM_LOG_NOTICE(
          "%s: pool '%s' reopened after %lld ms, the service having restarted",
          r.target.host.c_str(), r.request.pool_set.c_str(),
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()));
      return true;
    } else {
      why = errormsg();
      if (fatal) break;
    }
    const auto next = now + kReopenPause;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    if (wait.count() > 0 && !pause(wait)) return false;
  }
  if (!fatal) {
    RPMEM_LOG_ERR("the service did not come back (last try: %s)", why.c_str());
    why = no_answer_text(settings_.timeout) + " (the service did not come back)";
  }
  life_.lose(why);
  return false;
} catch (...) {
  life_.lose("out of memory while reopening the pool");
  return false;
}

void Pool::stop_keepalive() noexcept {
  if (keepalive_stop_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(keepalive_stop_fd_, &one, sizeof(one));
  if (keepalive_.joinable()) keepalive_.join();
  ::close(keepalive_stop_fd_);
  keepalive_stop_fd_ = -1;
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

}  // namespace rpmem
