// SPDX-License-Identifier: BSD-3-Clause
// The catch-up of a pool that ran ahead of its target, once reattached (the
// watch thread's): every marked page sent again, persistent, in runs of at
// most kCopyPages on the lanes in turn, then proved with the target's
// checksums of the pages sent (a page that differs is sent again), rounds
// until nothing is marked; then the pool is in sync and its record goes.
//
// The application writes on as it catches up, to the target: each of its
// writes marks its pages `touched` before it is sent. A run is cleared from
// the map (and from `touched`) before its bytes are read, and sent again
// if a page of it was touched before its acknowledgement: a write of the
// application that started before the clear stored its bytes before the
// run read them, one that started after may land before the run does.
// Whatever reaches the target last is then never older than the pool.
#include "common/log.h"
#include "common/page_sum.h"
#include "librpmem/pool.h"
#include "librpmem/pool_detail.h"

#include <cstring>

#include "librpmem.h"

namespace rpmem {

using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kPage = OosMap::kPage;
static_assert(kPage == proto::kChecksumPage);
// 256 KiB a run: a call of the application that finds its lane sending one
// waits for no more than that.
constexpr uint64_t kCopyPages = 64;
// Rounds of copy and proof before the pool is in sync whatever differs
// still (pages the application stores into without persisting yet: its
// persists send them).
constexpr unsigned kRounds = 4;
constexpr std::chrono::seconds kReportInterval{1};

}  // namespace

void Pool::report(proto::PoolSync state, uint64_t left, uint64_t done, bool now) noexcept try {
  Ahead &a = *ahead_;
  const auto t = Clock::now();
  if (!now && t - a.reported_at < kReportInterval) return;
  a.reported_at = t;
  proto::PoolStateReport r{state, left, done, state == proto::PoolSync::kInSync ? 0 : behind_ms()};
  // A daemon that takes no reports hears a keepalive: the catch-up may
  // outlast its peer-timeout.
  std::lock_guard lock(control_mu_);
  [[maybe_unused]] auto ec = channel_->send(
      a.reports ? proto::encode(r) : proto::encode_keepalive(), settings_.control_timeout());
} catch (...) {
}

bool Pool::catch_up() noexcept {
  Ahead &a = *ahead_;
  const auto start = Clock::now();
  const uint64_t marked = a.oos->count();
  const uint64_t losses = a.losses.load();
  if (!life_.catching_up()) return false;
  RPMEM_LOG_NOTICE("%s: pool '%s' catching up: %llu pages to send again", a.rec.target.c_str(),
                   a.rec.pool_set.c_str(), static_cast<unsigned long long>(marked));
  report(proto::PoolSync::kResyncing, marked * kPage, 0, true);
  uint64_t bytes = 0, mismatched = 0, checked = 0;
  Clock::duration proving{};
  for (unsigned round = 0; a.oos->count() > 0 && round < kRounds; ++round) {
    if (!copy_marked(bytes, false)) return false;
    const auto t = Clock::now();
    if (a.reports && !verify_sent(mismatched, checked)) return false;
    proving += Clock::now() - t;
    a.sent->clear(0, a.sent->pages());
  }
  // What the rounds left (pages the application writes all the time), with
  // every lane held: no write of the application is in flight beside it.
  if (const uint64_t left = a.oos->count()) {
    RPMEM_LOG_INFO("pool '%s': %llu pages sent once more with the lanes held",
                   a.rec.pool_set.c_str(), static_cast<unsigned long long>(left));
    if (!copy_marked(bytes, true)) return false;
  }
  life_.caught_up();
  // What calls that failed on the lost lanes marked as it caught up.
  if (a.oos->count() > 0 && !copy_marked(bytes, true)) return false;
  a.armed.store(false);
  const uint64_t behind = behind_ms();
  {
    std::lock_guard lock(a.mu);
    if (a.losses.load() == losses) {  // not lost again meanwhile: its record would be new
      a.record.drop_record();
      a.rec.behind_since_s = 0;
      a.behind_ns.store(0);
    }
  }
  report(proto::PoolSync::kInSync, 0, bytes, true);
  const auto in_ms = [](Clock::duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  const long long ms = in_ms(Clock::now() - start);
  RPMEM_LOG_NOTICE(
      "%s: pool '%s' in sync again after %lld ms behind: %llu bytes sent again in %lld ms "
      "(%.1f MB/s), %llu pages proved by the target's checksums (in %lld ms of them), %llu of "
      "them sent once more",
      a.rec.target.c_str(), a.rec.pool_set.c_str(), static_cast<long long>(behind),
      static_cast<unsigned long long>(bytes), ms,
      ms > 0 ? static_cast<double>(bytes) / 1e3 / static_cast<double>(ms) : 0.0,
      static_cast<unsigned long long>(checked), in_ms(proving),
      static_cast<unsigned long long>(mismatched));
  return true;
}

bool Pool::copy_marked(uint64_t &bytes, bool held) noexcept {
  CopyFailure failed;
  const bool done =
      held ? lanes_.with_all([&](auto lane) {
        return copy_runs(bytes, failed, [&](unsigned i, uint64_t off, uint64_t len, unsigned f) {
          return lane(i).write(transport::DataOp::kPersist, off, len, f);
        });
      })
           : copy_runs(bytes, failed, [&](unsigned i, uint64_t off, uint64_t len, unsigned f) {
               return lanes_.with(i, [&](transport::InitiatorLane &l) {
                 return l.write(transport::DataOp::kPersist, off, len, f);
               });
             });
  if (failed.ec) {
    // The target lost again (the lanes' slots free): behind.
    lane_result(failed.ec, PoolCall::kPersist, "persist", failed.lane, failed.off, failed.len);
    const PoolState s = life_.state();
    if (s == PoolState::kCatchingUp || s == PoolState::kInSync)
      life_.lose(std::string("catching up: ") + failed.ec.message());
  }
  return done;
}

template <class Send>
bool Pool::copy_runs(uint64_t &bytes, CopyFailure &failed, Send &&send) noexcept {
  Ahead &a = *ahead_;
  const unsigned flags = lane_flags(RPMEM_PERSIST_PERSISTENT);  // whatever the pool's level
  uint64_t from = 0, first = 0, count = 0;
  unsigned lane = quiet_lane(static_cast<unsigned>(lanes_.size()) - 1);
  while (a.oos->next(from, kCopyPages, first, count)) {
    if (stop_requested()) return false;  // close(): the run is still marked
    a.touched->clear(first, count);
    a.oos->clear(first, count);
    const uint64_t off = first * kPage, len = std::min(count * kPage, size_ - off);
    if (const std::error_code ec = send(lane, off, len, flags)) {
      a.oos->mark_pages(first, count);
      failed = {ec, lane, off, len};
      return false;
    }
    // Pages the application wrote while the run was on its way: once more.
    for (uint64_t p = first, f = 0, c = 0;
         a.touched->next(p, first + count - p, f, c) && f < first + count; p = f + c)
      a.oos->mark_pages(f, std::min(c, first + count - f));
    a.sent->mark_pages(first, count);
    bytes += len;
    from = first + count;
    lane = quiet_lane(lane);
    report(proto::PoolSync::kResyncing, a.oos->count() * kPage, bytes, false);
  }
  return true;
}

// The lane after `last` that the application has left the longest: the
// catch-up's runs keep off the lanes it is busy on.
unsigned Pool::quiet_lane(unsigned last) const noexcept {
  const unsigned n = static_cast<unsigned>(lanes_.size());
  unsigned best = (last + 1) % n;
  for (unsigned k = 2; k <= n; ++k) {
    const unsigned i = (last + k) % n;
    if (ahead_->lane_used[i].load(std::memory_order_relaxed) <
        ahead_->lane_used[best].load(std::memory_order_relaxed))
      best = i;
  }
  return best;
}

// The target's checksums of the pages sent, at most kMaxChecksumPages (in
// at most kMaxChecksumRanges runs) a request, against the pool's own; a
// page that differs is marked again.
bool Pool::verify_sent(uint64_t &mismatched, uint64_t &checked) noexcept try {
  Ahead &a = *ahead_;
  proto::ChecksumRequest req;
  uint32_t pages = 0;
  auto ask = [&]() -> bool {
    if (req.ranges.empty()) return true;
    proto::Bytes payload;
    std::error_code ec;
    {
      std::lock_guard lock(control_mu_);
      const auto timeout = settings_.control_timeout();
      ec = channel_->send(proto::encode(req), timeout);
      if (!ec) ec = channel_->recv(proto::MsgType::kChecksumResp, payload, timeout);
    }
    auto resp = ec ? std::nullopt : proto::decode_checksum_response(payload);
    if (!resp || resp->status != proto::Status::kSuccess || resp->sums.size() != pages) {
      const std::string why =
          ec     ? ec.message()
          : resp ? (resp->status != proto::Status::kSuccess ? proto::status_message(resp->status)
                                                            : "a checksum answer of another length")
                 : "a malformed checksum answer";
      life_.lose("catching up: the target's checksums: " + why);
      return false;
    }
    size_t i = 0;
    for (const proto::PageRange &r : req.ranges)
      for (uint64_t page = r.first; page < r.first + r.count; ++page, ++i) {
        const uint64_t off = page * kPage;
        if (page_sum(base_ + off, std::min(kPage, size_ - off)) != resp->sums[i]) {
          a.oos->mark_pages(page, 1);
          ++mismatched;
        }
      }
    checked += pages;
    req.ranges.clear();
    pages = 0;
    report(proto::PoolSync::kResyncing, a.oos->count() * kPage, 0, false);
    return !stop_requested();
  };
  uint64_t from = 0, first = 0, count = 0;
  while (a.sent->next(from, proto::kMaxChecksumPages - pages, first, count)) {
    req.ranges.push_back({first, static_cast<uint32_t>(count)});
    pages += static_cast<uint32_t>(count);
    from = first + count;
    if ((pages == proto::kMaxChecksumPages || req.ranges.size() == proto::kMaxChecksumRanges) &&
        !ask())
      return false;
  }
  return ask();
} catch (...) {
  life_.lose("catching up: out of memory");
  return false;
}

}  // namespace rpmem
