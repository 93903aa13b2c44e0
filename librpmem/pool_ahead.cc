// SPDX-License-Identifier: BSD-3-Clause
// A pool that runs ahead of a lost target (RPMEM_ON_LOSS=continue): its
// record and out-of-sync map, what losing the target marks, the reattach to
// the target (the watch thread's, while the pool is behind), and a close
// that keeps the record. The catch-up itself is in pool_catchup.cc.
#include "common/log.h"
#include "librpmem/errormsg.h"
#include "librpmem/pool.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace rpmem {

using Clock = std::chrono::steady_clock;

namespace {

// While behind, how often the watch thread looks for something to send, and
// how long it waits after a reattach that failed.
constexpr std::chrono::milliseconds kBehindPoll{500};
constexpr std::chrono::seconds kReattachPause{1};
constexpr std::chrono::seconds kReattachStep{2};

uint64_t wall_seconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

uint64_t Pool::behind_ms() const noexcept {
  const int64_t since = ahead_->behind_ns.load();
  const int64_t now = Clock::now().time_since_epoch().count();
  return since == 0 || now < since ? 0 : static_cast<uint64_t>((now - since) / 1000000);
}

std::error_code Pool::start_ahead(const PoolArgs &args, const Handshake &hs,
                                  const TargetAddress &target, const PoolAttr &attr,
                                  const std::optional<PoolRecord> &found, bool fresh) {
  auto a = std::make_unique<Ahead>(StateRecord(settings_.state_dir, args.target, args.pool_set));
  if (auto ec = a->record.make_dir()) return ec;
  a->rec.target = args.target;
  a->rec.pool_set = args.pool_set;
  a->rec.pool_size = size_;
  if (hs.response.token.size() == proto::kTokenSize)
    std::copy(hs.response.token.begin(), hs.response.token.end(), a->rec.token.begin());
  a->rec.boot_id = current_boot_id();
  a->target = target;
  a->attr = attr;
  a->reports = hs.hello.minor >= proto::kMinorRunAhead;
  a->lane_marked = std::make_unique<uint64_t[]>(lanes_.size());
  a->lane_used = std::make_unique<std::atomic<int64_t>[]>(lanes_.size());
  // The map a record kept, when it holds every page written while behind;
  // else every page is sent again.
  const bool keep = found && !fresh && map_trusted(*found);
  bool whole = found && !keep;
  auto oos = OosMap::open(a->record.map_path(), size_, !keep);
  if (!oos && keep) {
    RPMEM_LOG_WARN("%s: the whole pool will be sent again", oos.error().message.c_str());
    whole = true;
    oos = OosMap::open(a->record.map_path(), size_, true);
  }
  if (!oos) return oos.error().code;
  auto touched = OosMap::open({}, size_, true);
  auto sent = OosMap::open({}, size_, true);
  if (!touched || !sent) return errc(ENOMEM);
  a->oos = std::move(oos.value());
  a->touched = std::move(touched.value());
  a->sent = std::move(sent.value());
  if (whole) {
    a->oos->mark_all();
    if (has_headers_) a->oos->clear(0, 1);  // the target's own
  }
  if (found) {
    // The new session's token goes into the record before anything else:
    // it is the one the target knows now.
    a->rec.behind_since_s = found->behind_since_s;
    a->behind_ns.store(Clock::now().time_since_epoch().count());
    if (auto ec = a->record.save(a->rec)) return ec;
    life_.opened_behind();
    RPMEM_LOG_NOTICE(
        "%s: pool '%s' opened behind its master (its record in %s): %llu pages to send "
        "again, from the application's first write on; reads fail until it has caught up",
        args.target.c_str(), args.pool_set.c_str(), settings_.state_dir.c_str(),
        static_cast<unsigned long long>(a->oos->count()));
  }
  ahead_ = std::move(a);
  return {};
}

// Under PoolLife's mutex: nothing runs ahead before the record that says so
// is on storage.
bool Pool::prepare_behind(const std::string &why) noexcept try {
  if (!ahead_) return false;
  Ahead &a = *ahead_;
  std::lock_guard lock(a.mu);
  a.losses.fetch_add(1);
  a.attached.store(false);
  a.old_channel.store(true);
  if (a.rec.behind_since_s == 0) {
    a.rec.behind_since_s = wall_seconds();
    a.behind_ns.store(Clock::now().time_since_epoch().count());
  }
  a.rec.saved = false;
  a.rec.boot_id = current_boot_id();
  if (auto ec = a.record.save(a.rec)) {
    RPMEM_LOG_ERR("cannot keep the record of pool '%s' in %s: %s: it cannot run ahead (%s)",
                  a.rec.pool_set.c_str(), settings_.state_dir.c_str(), ec.message().c_str(),
                  why.c_str());
    return false;
  }
  a.armed.store(true);
  return true;
} catch (...) {
  return false;
}

void Pool::on_lost(bool behind) noexcept {
  lanes_.shutdown_all();
  if (!behind) return;
  for (unsigned i = 0; i < lanes_.size(); ++i) mark_unacknowledged(i);
  wake();  // the watch thread reattaches
}

void Pool::mark_unacknowledged(unsigned lane) noexcept {
  Ahead &a = *ahead_;
  const uint64_t loss = a.losses.load();
  // Once a loss's marks are in, a call behind takes no lane lock (a call
  // or a reattach may hold it).
  if (std::atomic_ref(a.lane_marked[lane]).load() == loss) return;
  lanes_.with(lane, [&](transport::InitiatorLane &l) {
    if (a.lane_marked[lane] == loss) return;
    try {
      for (const transport::PoolRange &r : l.unacknowledged()) a.oos->mark(r.offset, r.length);
    } catch (...) {
      a.oos->mark_all();  // out of memory: every page is sent again
    }
    std::atomic_ref(a.lane_marked[lane]).store(loss);
  });
}

bool Pool::behind_turn(int &hangup) noexcept {
  Ahead &a = *ahead_;
  if (a.old_channel.exchange(false)) {
    // The lost session's end reaches rpmemd when the network does: it
    // holds the pool no longer than that.
    if (hangup >= 0) ::close(hangup);
    hangup = -1;
    std::lock_guard lock(control_mu_);
    channel_->close(std::chrono::milliseconds(200));
  }
  if (!a.armed.load()) return pause(kBehindPoll);
  // Everything the lost lanes had not had acknowledged is marked before
  // they are replaced.
  for (unsigned i = 0; i < lanes_.size(); ++i) mark_unacknowledged(i);
  std::string why;
  int err = 0;
  try {
    err = reattach(hangup, why);
  } catch (const std::exception &e) {
    err = ENOMEM;
    why = e.what();
  }
  if (err == 0) return true;
  if (!a.warned)
    RPMEM_LOG_WARN("%s: pool '%s' behind its target for %lld ms: %s (trying again every %lld s)",
                   a.rec.target.c_str(), a.rec.pool_set.c_str(),
                   static_cast<long long>(behind_ms()), why.c_str(),
                   static_cast<long long>(kReattachPause.count()));
  else
    RPMEM_LOG_DEBUG("reattach: %s", why.c_str());
  a.warned = true;
  return pause(kReattachPause);
}

// The pool opened again as this client's session (its token), through the
// same steps as the first open; the new lanes and channel put in place of
// the lost ones.
int Pool::reattach(int &hangup, std::string &why) {
  Ahead &a = *ahead_;
  HandshakeArgs ha;
  ha.target = a.target;
  ha.transports = client_transports(settings_);
  // Each step within kReattachStep: a close() waits for no more than that.
  ha.step = std::min<std::chrono::milliseconds>(settings_.control_timeout(), kReattachStep);
  ha.answer = settings_.control_timeout();
  proto::SessionToken token;
  {
    std::lock_guard lock(a.mu);
    token = a.rec.token;
  }
  ha.request = [&](const proto::Hello &hello, proto::PoolRequest &req) {
    req = pool_request(a.rec.pool_set, size_, static_cast<unsigned>(lanes_.size()), false, {},
                       settings_, hello, ha.transports);
    if (hello.minor >= proto::kMinorRunAhead && req.leveled) {
      req.ahead = true;
      req.ahead_flags = proto::kRunAhead | (a.fresh ? proto::kOpenBehind : 0);
    }
    if (!a.fresh && req.extended) {
      req.reopen = true;
      req.token = token;
    }
    return 0;
  };
  Handshake hs;
  if (int err = handshake(connector_, settings_, ha, hs)) {
    why = errormsg();
    return err;
  }
  const proto::PoolResponse &resp = hs.response;
  PoolAttr known;
  {
    std::lock_guard lock(control_mu_);
    known = a.attr;
  }
  // A session that cannot take the pool's place ends without a close
  // request: rpmemd keeps the pool marked behind, and this client's token.
  if (const char *other = unfit_to_reattach(resp, known)) {
    hs.channel->close(std::chrono::milliseconds(200));
    why = other;
    return ECONNREFUSED;
  }
  transport::InitiatorParams params =
      lane_params(a.target, resp, hs.hello, settings_, base_, size_);
  auto security = choose_lane_security(hs.request.lane_flags, resp.lane_flags, resp.transport,
                                       a.target.service);
  Result<Lanes> lanes =
      security ? connector_.lanes(*security, a.target, resp, *hs.channel, settings_, params)
               : Result<Lanes>(security.error());
  if (!lanes) {
    hs.channel->close(std::chrono::milliseconds(200));
    why = "its lanes: " + lanes.error().message;
    return lanes.error().code.value();
  }
  take_reattached(hs, std::move(lanes.value()), params.route, known, hangup);
  RPMEM_LOG_NOTICE("%s: pool '%s' reattached after %lld ms behind its target", a.rec.target.c_str(),
                   a.rec.pool_set.c_str(), static_cast<long long>(behind_ms()));
  return 0;
}

// Why the session `resp` answers cannot take the pool's place (null: it
// can). A token the target no longer knows: the next try opens the pool
// anew, and sends it whole.
const char *Pool::unfit_to_reattach(const proto::PoolResponse &resp, const PoolAttr &known) {
  Ahead &a = *ahead_;
  const bool headers = (resp.pool_flags & proto::kPoolHasHeaders) != 0;
  if (resp.status == proto::Status::kStale && !a.fresh) {
    a.fresh = true;
    return "the target no longer knows this client's session (another opened the pool since)";
  }
  if (resp.status != proto::Status::kSuccess) return proto::status_message(resp.status);
  if (resp.nlanes != lanes_.size()) return "the target grants it another number of lanes";
  if (headers != has_headers_ || (headers && !(resp.attr == known)))
    return "the target's pool is not this one (its attributes differ)";
  return nullptr;
}

// The new session is the pool's: its token first (into the record), then
// its lanes, its levels, its channel (`hangup` its descriptor's copy).
void Pool::take_reattached(Handshake &hs, Lanes lanes, std::shared_ptr<transport::LaneRoute> route,
                           const PoolAttr &known, int &hangup) {
  Ahead &a = *ahead_;
  const proto::PoolResponse &resp = hs.response;
  {
    std::lock_guard lock(a.mu);
    if (resp.token.size() == proto::kTokenSize)
      std::copy(resp.token.begin(), resp.token.end(), a.rec.token.begin());
    if (auto ec = a.record.save(a.rec))
      RPMEM_LOG_ERR("cannot keep the record of pool '%s': %s", a.rec.pool_set.c_str(),
                    ec.message().c_str());
  }
  if (a.fresh) {
    a.oos->mark_all();
    if (has_headers_) a.oos->clear(0, 1);
    a.fresh = false;
  }
  lanes_.replace(std::move(lanes));
  visible_granted_.store((resp.levels & proto::level_bit(proto::Durability::kVisible)) != 0);
  a.reports = hs.hello.minor >= proto::kMinorRunAhead;
  const int fd = hs.channel->hangup_fd();
  {
    std::lock_guard lock(control_mu_);
    if (reopen_ && route && resp.token.size() == proto::kTokenSize)
      keep_for_reopen(a.target, hs, known, std::move(route));
    channel_ = std::move(hs.channel);
  }
  if (hangup >= 0) ::close(hangup);
  hangup = fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  a.attached.store(true);
  a.warned = false;
}

int Pool::close_ahead() noexcept try {
  Ahead &a = *ahead_;
  lanes_.clear();
  life_.close();
  const uint64_t pages = a.oos->count();
  const std::error_code synced = a.oos->sync();
  std::error_code saved;
  {
    std::lock_guard lock(a.mu);
    a.rec.saved = !synced;
    a.rec.boot_id = current_boot_id();
    saved = a.record.save(a.rec);
  }
  // No close request: the target keeps the pool marked behind until this
  // client's next open has caught it up.
  std::lock_guard lock(control_mu_);
  channel_->close(std::chrono::milliseconds(200));
  if (synced || saved)
    RPMEM_LOG_WARN(
        "pool '%s': its out-of-sync map could not be saved whole (%s): a power cut "
        "now would send the whole pool again",
        a.rec.pool_set.c_str(), (synced ? synced : saved).message().c_str());
  RPMEM_LOG_NOTICE(
      "%s: pool '%s' closed behind its target: %llu pages to send again, kept in %s; the next "
      "open of the pool catches it up",
      a.rec.target.c_str(), a.rec.pool_set.c_str(), static_cast<unsigned long long>(pages),
      a.record.record_path().c_str());
  return 0;
} catch (...) {
  return 0;  // the record saved when it went behind holds
}

}  // namespace rpmem
