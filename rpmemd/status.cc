// SPDX-License-Identifier: BSD-3-Clause
// The service's status: per-session records, the snapshot, and its text, JSON and metrics forms.
#include "rpmemd/status.h"

#include "common/json_escape.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <tuple>

namespace rpmemd {

using rpmem::transport::kLatencyBoundsNs;
using rpmem::transport::kLatencyBuckets;
using rpmem::transport::LaneTotals;

void SessionStatus::pool_opened(const PoolInfo &info,
                                std::shared_ptr<rpmem::transport::TargetCounters> c,
                                std::function<int64_t()> unpersisted_ns) {
  std::lock_guard lock(mu_);
  pool_ = info;
  open_ = true;
  counters_ = std::move(c);
  unpersisted_ns_ = std::move(unpersisted_ns);
}

void SessionStatus::pool_closed() {
  std::lock_guard lock(mu_);
  closed_ = totals_locked();
  counters_.reset();
  unpersisted_ns_ = nullptr;
  open_ = false;
}

void SessionStatus::catch_up(const rpmem::proto::PoolStateReport &r) {
  const int64_t now = rpmem::transport::LaneCounters::now_ns();
  std::lock_guard lock(mu_);
  if (r.state != rpmem::proto::PoolSync::kResyncing)
    resync_since_ns_ = 0;
  else if (resync_since_ns_ == 0)
    resync_since_ns_ = now;
  report_ = r;
  report_ns_ = now;
}

LaneTotals SessionStatus::totals_locked() const {
  LaneTotals t = closed_;
  if (counters_) t += counters_->sum();
  return t;
}

void SessionStatus::sample(int64_t now_ns) {
  std::lock_guard lock(mu_);
  samples_.emplace_back(now_ns, totals_locked().calls());
  while (samples_.size() > 11) samples_.pop_front();
}

SessionStatus::View SessionStatus::view() const {
  std::lock_guard lock(mu_);
  View v;
  v.id = id_;
  v.cn = cn_;
  v.peer = peer_;
  v.started_ns = started_ns_;
  v.open = open_;
  v.pool = pool_;
  v.totals = totals_locked();
  if (unpersisted_ns_) v.unpersisted_ns = unpersisted_ns_();
  // Over the last 10 s of samples; in a session's first second, since it began.
  int64_t t0 = started_ns_, t1 = rpmem::transport::LaneCounters::now_ns();
  uint64_t c0 = 0, c1 = v.totals.calls();
  if (samples_.size() >= 2) {
    std::tie(t0, c0) = samples_.front();
    std::tie(t1, c1) = samples_.back();
  }
  if (t1 > t0 && c1 >= c0)
    v.calls_per_s = static_cast<double>(c1 - c0) * 1e9 / static_cast<double>(t1 - t0);
  v.sync = report_.state;
  if (v.sync != rpmem::proto::PoolSync::kInSync) {
    v.resync_left = report_.bytes_left;
    v.resync_done = report_.bytes_done;
    v.behind_s = static_cast<double>(report_.behind_ms) / 1e3 +
                 static_cast<double>(rpmem::transport::LaneCounters::now_ns() - report_ns_) / 1e9;
    if (resync_since_ns_ != 0 && report_ns_ > resync_since_ns_)
      v.resync_bytes_per_s = static_cast<double>(report_.bytes_done) * 1e9 /
                             static_cast<double>(report_ns_ - resync_since_ns_);
  }
  return v;
}

namespace {

[[gnu::format(printf, 1, 2)]] std::string format(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return n < 0 ? std::string() : std::string(buf, std::min<size_t>(size_t(n), sizeof(buf) - 1));
}

// A latency bound as text: "<= 20 us", "> 10 s", "-" with none.
std::string bound_text(uint64_t ns) {
  if (ns == 0) return "-";
  if (ns == UINT64_MAX) return "> 10 s";
  if (ns < 1'000'000) return format("<= %" PRIu64 " us", ns / 1000);
  if (ns < 1'000'000'000) return format("<= %" PRIu64 " ms", ns / 1'000'000);
  return format("<= %" PRIu64 " s", ns / 1'000'000'000);
}

std::string seconds_since(int64_t now_ns, int64_t then_ns) {
  return format("%.1f s", static_cast<double>(now_ns - then_ns) / 1e9);
}

std::string json_string(const std::string &s) { return "\"" + rpmem::json_escape(s) + "\""; }

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"') {
      o += '\\';
      o += c;
    } else if (c == '\n') {
      o += "\\n";
    } else {
      o += c;
    }
  }
  return o;
}

// A quantile in seconds for JSON: the bucket's bound, null with none.
std::string json_quantile(const LaneTotals &t, double q) {
  const uint64_t ns = t.quantile_ns(q);
  if (ns == 0) return "null";
  if (ns == UINT64_MAX) return "\"+Inf\"";
  return format("%g", static_cast<double>(ns) / 1e9);
}

// A metric family's HELP and TYPE lines.
void head(std::string &o, const char *name, const char *type, const char *help) {
  o += format("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

// The durability levels' metrics: bytes acknowledged at each level, by
// client, and the age of the oldest visible byte not persistent yet.
void render_levels(const StatusSnapshot &s, const std::map<std::string, LaneTotals> &by_client,
                   std::string &o) {
  head(o, "rpmemd_bytes_acknowledged_total", "counter",
       "Bytes of persists and flushes acknowledged, by client and durability level.");
  for (const auto &[cn, t] : by_client) {
    o += format("rpmemd_bytes_acknowledged_total{client=\"%s\",level=\"persistent\"} %" PRIu64 "\n",
                label(cn).c_str(), t.persistent_bytes());
    o += format("rpmemd_bytes_acknowledged_total{client=\"%s\",level=\"visible\"} %" PRIu64 "\n",
                label(cn).c_str(), t.visible_bytes);
  }
  int64_t oldest = 0;
  for (const auto &v : s.sessions) oldest = std::max(oldest, v.unpersisted_ns);
  head(o, "rpmemd_visible_unpersisted_seconds", "gauge",
       "Age of the oldest byte acknowledged visible and not persistent yet, over every session.");
  o += format("rpmemd_visible_unpersisted_seconds %.3f\n", static_cast<double>(oldest) / 1e9);
}

// The persists' and drains' service times on the daemon, of every client,
// as a histogram.
void render_latency(const LaneTotals &all, std::string &o) {
  head(o, "rpmemd_persist_seconds", "histogram",
       "Time from a persist's or drain's request to its reply, on the daemon.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kLatencyBoundsNs.size(); ++i) {
    cumulative += all.latency[i];
    o += format("rpmemd_persist_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                static_cast<double>(kLatencyBoundsNs[i]) / 1e9, cumulative);
  }
  cumulative += all.latency[kLatencyBuckets - 1];
  o += format("rpmemd_persist_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cumulative);
  o += format("rpmemd_persist_seconds_sum %.9f\n", static_cast<double>(all.served_ns) / 1e9);
  o += format("rpmemd_persist_seconds_count %" PRIu64 "\n", cumulative);
}

// The pools open, by the medium under them ("pmem", "cxl", "disk", "ram").
void render_media(const StatusSnapshot &s, std::string &o) {
  std::map<std::string, uint64_t> media;
  for (const auto &v : s.sessions)
    if (v.open) ++media[v.pool.medium];
  head(o, "rpmemd_pools_open", "gauge", "Pools open, by the medium under them.");
  for (const auto &[medium, n] : media)
    o += format("rpmemd_pools_open{medium=\"%s\"} %" PRIu64 "\n", label(medium).c_str(), n);
}

double seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

const char *sync_name(rpmem::proto::PoolSync s) {
  return s == rpmem::proto::PoolSync::kBehind      ? "behind"
         : s == rpmem::proto::PoolSync::kResyncing ? "catching up"
                                                   : "in sync";
}

// A session's pool that its client reports behind or catching up.
std::string catch_up_text(const SessionStatus::View &v) {
  if (v.sync == rpmem::proto::PoolSync::kInSync) return "";
  return format(
      "; pool %s, behind for %.0f s: %" PRIu64 " B to send again, %" PRIu64 " B sent, %.1f MB/s",
      sync_name(v.sync), v.behind_s, v.resync_left, v.resync_done, v.resync_bytes_per_s / 1e6);
}

// The catch-up's metrics: pools by their state, what is left, how long.
void render_catch_up(const StatusSnapshot &s, std::string &o) {
  std::map<std::string, uint64_t> states{{"in sync", 0}, {"behind", 0}, {"catching up", 0}};
  uint64_t left = 0;
  double behind = 0;
  for (const auto &v : s.sessions) {
    if (!v.open) continue;
    ++states[sync_name(v.sync)];
    left += v.resync_left;
    behind = std::max(behind, v.behind_s);
  }
  states["behind"] += s.behind.size();
  for (const auto &b : s.behind) behind = std::max(behind, seconds(s.now_ns - b.since_ns));
  head(o, "rpmemd_pools", "gauge",
       "Pools, by whether they are in sync with their client's (behind: with no session since "
       "its own ended, or its client says so).");
  for (const auto &[state, n] : states)
    o += format("rpmemd_pools{state=\"%s\"} %" PRIu64 "\n", state.c_str(), n);
  head(o, "rpmemd_resync_bytes_left", "gauge",
       "Bytes the clients catching up have left to send again.");
  o += format("rpmemd_resync_bytes_left %" PRIu64 "\n", left);
  head(o, "rpmemd_behind_seconds", "gauge", "How long the pool behind the longest has been so.");
  o += format("rpmemd_behind_seconds %.3f\n", behind);
}

}  // namespace

std::string render_text(const StatusSnapshot &s) {
  std::string o =
      format("rpmemd %s, up %.0f s: %zu session%s (%" PRIu64 " since start, %" PRIu64
             " reopened after a restart)\n",
             s.version.c_str(), s.uptime_s, s.sessions.size(), s.sessions.size() == 1 ? "" : "s",
             s.sessions_started, s.sessions_reopened);
  for (const auto &v : s.sessions) {
    const LaneTotals &t = v.totals;
    o += format("session %u: '%s' from %s", v.id, v.cn.c_str(), v.peer.c_str());
    if (v.pool.pool_set.empty()) {
      o += ", no pool open";
    } else {
      o += format(", %s%s, lanes %u/%u asked, %s, %s, %s, %s", v.pool.pool_set.c_str(),
                  v.open ? "" : " (closed)", v.pool.lanes_granted, v.pool.lanes_asked,
                  v.pool.transport.c_str(), v.pool.medium.c_str(), v.pool.method.c_str(),
                  v.pool.durability.c_str());
    }
    o += format(
        "; persisted %" PRIu64 " B in %" PRIu64 " calls, flushed %" PRIu64 " B in %" PRIu64
        ", %" PRIu64 " drains, read %" PRIu64 " B in %" PRIu64 ", %" PRIu64 " failed, %" PRIu64
        " lanes back, %" PRIu64 " probes; acknowledged persistent %" PRIu64 " B, visible %" PRIu64
        " B, the oldest not persistent yet %s; %.1f calls/s; persist p50 %s, p99 %s;"
        " last request %s\n",
        t.persisted_bytes, t.persists, t.flushed_bytes, t.flushes, t.drains, t.read_bytes, t.reads,
        t.failed, t.lanes_back, t.probes, t.persistent_bytes(), t.visible_bytes,
        v.unpersisted_ns ? format("%.3f s", static_cast<double>(v.unpersisted_ns) / 1e9).c_str()
                         : "none",
        v.calls_per_s, bound_text(t.quantile_ns(0.5)).c_str(),
        bound_text(t.quantile_ns(0.99)).c_str(),
        t.last_ns ? (seconds_since(s.now_ns, t.last_ns) + " ago").c_str() : "none");
    o.pop_back();  // the line's end, after what a catch-up adds
    o += catch_up_text(v) + "\n";
  }
  for (const auto &b : s.behind)
    o += format(
        "pool %s of '%s': may be behind its master for %.0f s (its session ended "
        "without a close; it waits for that client)\n",
        b.pool_set.c_str(), b.cn.c_str(), seconds(s.now_ns - b.since_ns));
  o += "caps (in use / at most):\n";
  for (const auto &c : s.caps)
    o += format("  %-28s %" PRIu64 " / %" PRIu64 "\n", c.name.c_str(), c.used, c.max);
  o += "refused since start:";
  if (s.refusals.empty()) o += " none";
  o += "\n";
  for (const auto &[why, n] : s.refusals) o += format("  %8" PRIu64 "  ", n) + why + "\n";
  return o;
}

std::string render_json(const StatusSnapshot &s) {
  std::string o = "{\"version\":" + json_string(s.version) +
                  format(",\"uptime_seconds\":%.3f,\"sessions_started\":%" PRIu64
                         ",\"sessions_reopened\":%" PRIu64,
                         s.uptime_s, s.sessions_started, s.sessions_reopened) +
                  ",\"sessions\":[";
  bool first = true;
  for (const auto &v : s.sessions) {
    const LaneTotals &t = v.totals;
    o += first ? "" : ",";
    first = false;
    o +=
        format("{\"id\":%u,\"client\":", v.id) + json_string(v.cn) +
        ",\"address\":" + json_string(v.peer) + ",\"pool_set\":" + json_string(v.pool.pool_set) +
        format(",\"open\":%s,\"lanes_asked\":%u,\"lanes_granted\":%u,", v.open ? "true" : "false",
               v.pool.lanes_asked, v.pool.lanes_granted) +
        "\"transport\":" + json_string(v.pool.transport) +
        ",\"medium\":" + json_string(v.pool.medium) +
        ",\"persist_method\":" + json_string(v.pool.method) +
        ",\"durability\":" + json_string(v.pool.durability) +
        format(",\"bytes_acknowledged_persistent\":%" PRIu64
               ",\"bytes_acknowledged_visible\":%" PRIu64 ",\"unpersisted_seconds\":%.3f",
               t.persistent_bytes(), t.visible_bytes, static_cast<double>(v.unpersisted_ns) / 1e9) +
        format(",\"persists\":%" PRIu64 ",\"bytes_persisted\":%" PRIu64 ",\"flushes\":%" PRIu64
               ",\"bytes_flushed\":%" PRIu64 ",\"drains\":%" PRIu64 ",\"reads\":%" PRIu64
               ",\"bytes_read\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"lanes_back\":%" PRIu64
               ",\"probes\":%" PRIu64 ",\"calls_per_second\":%.1f,",
               t.persists, t.persisted_bytes, t.flushes, t.flushed_bytes, t.drains, t.reads,
               t.read_bytes, t.failed, t.lanes_back, t.probes, v.calls_per_s) +
        "\"sync\":" + json_string(sync_name(v.sync)) +
        format(",\"resync_bytes_left\":%" PRIu64 ",\"resync_bytes_done\":%" PRIu64
               ",\"resync_bytes_per_second\":%.0f,\"behind_seconds\":%.3f,",
               v.resync_left, v.resync_done, v.resync_bytes_per_s, v.behind_s) +
        "\"persist_p50_seconds\":" + json_quantile(t, 0.5) +
        ",\"persist_p99_seconds\":" + json_quantile(t, 0.99) + ",\"seconds_since_last_request\":" +
        (t.last_ns ? format("%.3f", static_cast<double>(s.now_ns - t.last_ns) / 1e9) : "null") +
        "}";
  }
  o += "],\"behind\":[";
  first = true;
  for (const auto &b : s.behind) {
    o += (first ? "{\"pool_set\":" : ",{\"pool_set\":") + json_string(b.pool_set) +
         ",\"client\":" + json_string(b.cn) +
         format(",\"behind_seconds\":%.3f}", seconds(s.now_ns - b.since_ns));
    first = false;
  }
  o += "],\"caps\":{";
  first = true;
  for (const auto &c : s.caps) {
    o += (first ? "" : ",") + json_string(c.name) +
         format(":{\"used\":%" PRIu64 ",\"max\":%" PRIu64 "}", c.used, c.max);
    first = false;
  }
  o += "},\"refusals\":{";
  first = true;
  for (const auto &[why, n] : s.refusals) {
    o += (first ? "" : ",") + json_string(why) + format(":%" PRIu64, n);
    first = false;
  }
  return o + "}}\n";
}

std::string render_metrics(const StatusSnapshot &s) {
  // Every session's lanes, ended or live, by client and in all.
  std::map<std::string, LaneTotals> by_client;
  for (const auto &[cn, t] : s.ended) by_client[cn] += t;
  for (const auto &v : s.sessions) by_client[v.cn] += v.totals;
  LaneTotals all;
  for (const auto &[cn, t] : by_client) all += t;

  std::string o;
  head(o, "rpmemd_uptime_seconds", "gauge", "Seconds since the service started.");
  o += format("rpmemd_uptime_seconds %.3f\n", s.uptime_s);
  head(o, "rpmemd_sessions", "gauge", "Sessions being served.");
  o += format("rpmemd_sessions %zu\n", s.sessions.size());
  head(o, "rpmemd_sessions_started_total", "counter",
       "Sessions started since the service started.");
  o += format("rpmemd_sessions_started_total %" PRIu64 "\n", s.sessions_started);
  head(o, "rpmemd_sessions_reopened_total", "counter",
       "Pools reopened by their session after a restart of the service, since this one started.");
  o += format("rpmemd_sessions_reopened_total %" PRIu64 "\n", s.sessions_reopened);

  // A counter family with one sample per client (and `op`, when given).
  using Field = uint64_t LaneTotals::*;
  auto per_client = [&](const char *name, const char *help,
                        std::initializer_list<std::pair<const char *, Field>> fields) {
    head(o, name, "counter", help);
    for (const auto &[cn, t] : by_client)
      for (const auto &[op, field] : fields)
        o += format("%s{client=\"%s\"%s%s%s} %" PRIu64 "\n", name, label(cn).c_str(),
                    op ? ",op=\"" : "", op ? op : "", op ? "\"" : "", t.*field);
  };
  per_client("rpmemd_requests_total", "Data requests served, by client and kind.",
             {{"persist", &LaneTotals::persists},
              {"flush", &LaneTotals::flushes},
              {"drain", &LaneTotals::drains},
              {"read", &LaneTotals::reads}});
  per_client("rpmemd_requests_failed_total", "Data requests answered with an error, by client.",
             {{nullptr, &LaneTotals::failed}});
  per_client("rpmemd_lanes_back_total",
             "Lanes that connected again within their session (a broken or stalled connection), "
             "by client.",
             {{nullptr, &LaneTotals::lanes_back}});
  per_client("rpmemd_lane_probes_total",
             "Probes answered: requests whose reply was late at the client (a lost packet, or a "
             "slow reply), by client.",
             {{nullptr, &LaneTotals::probes}});
  per_client("rpmemd_bytes_persisted_total", "Bytes of persists served, by client.",
             {{nullptr, &LaneTotals::persisted_bytes}});
  per_client("rpmemd_bytes_flushed_total", "Bytes of flushes (posted writes), by client.",
             {{nullptr, &LaneTotals::flushed_bytes}});
  per_client("rpmemd_bytes_read_total", "Bytes of reads served, by client.",
             {{nullptr, &LaneTotals::read_bytes}});
  render_levels(s, by_client, o);
  render_media(s, o);
  render_catch_up(s, o);

  render_latency(all, o);

  head(o, "rpmemd_cap_used", "gauge", "What a cap counts now, by its config key.");
  for (const auto &c : s.caps)
    o += format("rpmemd_cap_used{cap=\"%s\"} %" PRIu64 "\n", label(c.name).c_str(), c.used);
  head(o, "rpmemd_cap_max", "gauge", "A cap's bound, by its config key.");
  for (const auto &c : s.caps)
    o += format("rpmemd_cap_max{cap=\"%s\"} %" PRIu64 "\n", label(c.name).c_str(), c.max);
  head(o, "rpmemd_refusals_total", "counter", "Connections refused or dropped, by reason.");
  for (const auto &[why, n] : s.refusals)
    o += format("rpmemd_refusals_total{reason=\"%s\"} %" PRIu64 "\n", label(why).c_str(), n);
  return o;
}

std::string render_systemd_status(const StatusSnapshot &s) {
  // Sessions as max-sessions counts them: every one, counted by its lanes or not.
  uint64_t sessions = 0;
  for (const auto &c : s.caps)
    if (c.name == "max-sessions") sessions = c.used;
  std::string o = format("%" PRIu64 " session%s", sessions, sessions == 1 ? "" : "s");
  for (const auto &c : s.caps)
    if (c.name == "max-handshakes" || c.name == "max-connections")
      o += format("; %s %" PRIu64 "/%" PRIu64, c.name.c_str() + 4, c.used, c.max);
  uint64_t refused = 0;
  for (const auto &r : s.refusals) refused += r.second;
  return o + format("; %" PRIu64 " refused since start", refused);
}

}  // namespace rpmemd
