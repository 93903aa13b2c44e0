// SPDX-License-Identifier: BSD-3-Clause
// What the service tells the people who run it: one record per session
// (SessionStatus, shared by the session's thread, which fills it in, and
// the event loop, which reads it), a snapshot of the whole service
// (StatusSnapshot), and its three renderings -- the text of `rpmemd
// status`, the same as JSON, and Prometheus' text exposition format.
// The renderings are pure functions of a snapshot.
#ifndef RPMEMD_STATUS_H
#define RPMEMD_STATUS_H

#include "common/proto.h"
#include "common/transport/lane_stats.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace rpmemd {

// One session's pool and lanes, as its thread opened them.
struct PoolInfo {
  std::string pool_set;
  unsigned lanes_asked = 0, lanes_granted = 0;
  std::string transport;   // proto::lanes_name(): "tcp", "tcp+tls", "tcp+sealed", "verbs"
  std::string medium;      // "pmem", "cxl", "disk", "ram"
  std::string method;      // "GPSPM", "APM"
  std::string durability;  // the pool's level, proto::durability_name()
};

// Thread-safety: pool_opened()/pool_closed() on the session's thread, the
// rest on the event loop's; a mutex guards the strings and the counters'
// pointer (taken when a pool opens or closes and when the loop looks:
// never per request).
class SessionStatus {
 public:
  SessionStatus(unsigned id, std::string cn, std::string peer, int64_t started_ns)
      : id_(id), cn_(std::move(cn)), peer_(std::move(peer)), started_ns_(started_ns) {}

  // The pool is open and its lanes count into `counters`.
  // `unpersisted_ns` tells how old its oldest visible byte not yet durable
  // is (0: none); it is called under the status's lock, and not after
  // pool_closed().
  void pool_opened(const PoolInfo &info, std::shared_ptr<rpmem::transport::TargetCounters> c,
                   std::function<int64_t()> unpersisted_ns = {});
  // It is closed: what its lanes did stays in the session's totals.
  void pool_closed();
  // The client's report of its pool's catch-up (protocol minor 10).
  void catch_up(const rpmem::proto::PoolStateReport &r);
  const std::string &cn() const noexcept { return cn_; }

  struct View {
    unsigned id = 0;
    std::string cn, peer;
    int64_t started_ns = 0;
    bool open = false;  // a pool is open
    PoolInfo pool;
    rpmem::transport::LaneTotals totals;  // this session's lanes, since it began
    double calls_per_s = 0;               // over the last 10 s (or since it began)
    int64_t unpersisted_ns = 0;           // age of its oldest visible byte not durable yet
    // The client's last report of its pool: in sync, behind, catching up
    // (the bytes it has left to send again, has sent, how fast, and how
    // long since it went behind, as of now).
    rpmem::proto::PoolSync sync = rpmem::proto::PoolSync::kInSync;
    uint64_t resync_left = 0, resync_done = 0;
    double resync_bytes_per_s = 0;
    double behind_s = 0;
  };
  // Called once a second by the loop: the counters' sums then, for the
  // rate over the last 10 s.
  void sample(int64_t now_ns);
  View view() const;

 private:
  rpmem::transport::LaneTotals totals_locked() const;

  const unsigned id_;
  const std::string cn_, peer_;
  const int64_t started_ns_;
  mutable std::mutex mu_;
  PoolInfo pool_;
  bool open_ = false;
  std::shared_ptr<rpmem::transport::TargetCounters> counters_;
  std::function<int64_t()> unpersisted_ns_;
  rpmem::transport::LaneTotals closed_;               // of the pools closed before
  std::deque<std::pair<int64_t, uint64_t>> samples_;  // (time, calls), 11 at most
  rpmem::proto::PoolStateReport report_;
  int64_t report_ns_ = 0;        // when it came
  int64_t resync_since_ns_ = 0;  // when the catch-up's first report came
};

// The service at one instant.
struct StatusSnapshot {
  std::string version;
  double uptime_s = 0;
  int64_t now_ns = 0;
  std::vector<SessionStatus::View> sessions;
  struct Cap {
    std::string name;  // the config key
    uint64_t used = 0, max = 0;
  };
  std::vector<Cap> caps;
  std::vector<std::pair<std::string, uint64_t>> refusals;  // reason, count since start
  uint64_t sessions_started = 0;                           // since start
  uint64_t sessions_reopened = 0;  // pools reopened by their session after a restart
  // What the sessions that have ended did, by client certificate.
  std::vector<std::pair<std::string, rpmem::transport::LaneTotals>> ended;
  // Pools whose session could run ahead of them and ended without a close
  // (they may be behind their master), until a session opens them again.
  struct Behind {
    std::string pool_set, cn;
    int64_t since_ns = 0;
  };
  std::vector<Behind> behind;
};

// The service's list of StatusSnapshot::behind. Thread-safe.
class BehindPools {
 public:
  void ended(const std::string &pool_set, const std::string &cn);
  void opened(const std::string &pool_set, const std::string &cn);
  std::vector<StatusSnapshot::Behind> list() const;

 private:
  mutable std::mutex mu_;
  std::vector<StatusSnapshot::Behind> pools_;
};

// `rpmemd status`: a line per session, then the caps, then the refusals.
std::string render_text(const StatusSnapshot &s);
// The same, as one JSON object.
std::string render_json(const StatusSnapshot &s);
// Prometheus' text exposition format (version 0.0.4).
std::string render_metrics(const StatusSnapshot &s);
// The short line for systemd's STATUS=: from the caps (max-sessions,
// max-handshakes, max-connections) and the refusals only.
std::string render_systemd_status(const StatusSnapshot &s);

}  // namespace rpmemd

#endif  // RPMEMD_STATUS_H
