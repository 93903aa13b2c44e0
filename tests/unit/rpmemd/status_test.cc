// SPDX-License-Identifier: BSD-3-Clause
// What the status channel tells, without a service: the lanes' counters
// and their sums, the latency quantiles from the histogram, a session's
// totals across its pool's close and its rate, and the three renderings
// (the text, JSON with hostile names escaped, Prometheus' format checked
// line by line).
#include "rpmemd/status.h"

#include "tests/prom_check.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

namespace rpmemd {
namespace {

using rpmem::transport::LaneCounters;
using rpmem::transport::LaneOp;
using rpmem::transport::LaneTotals;
using rpmem::transport::TargetCounters;

TEST(LaneStats, LanesCountApartAndSumUp) {
  TargetCounters c(3);
  const int64_t t = LaneCounters::now_ns();
  c.lane(0)->served(LaneOp::kPersist, 4096, t, false);
  c.lane(0)->served(LaneOp::kPersist, 64, t, true);
  c.lane(1)->served(LaneOp::kFlush, 100, t, false);
  c.lane(1)->served(LaneOp::kDrain, 0, t, false);
  c.lane(2)->served(LaneOp::kRead, 65536, t, false);
  EXPECT_EQ(c.lane(3), nullptr) << "no lane past the last";
  const LaneTotals s = c.sum();
  EXPECT_EQ(s.persists, 2u);
  EXPECT_EQ(s.persisted_bytes, 4160u);
  EXPECT_EQ(s.flushes, 1u);
  EXPECT_EQ(s.flushed_bytes, 100u);
  EXPECT_EQ(s.drains, 1u);
  EXPECT_EQ(s.reads, 1u);
  EXPECT_EQ(s.read_bytes, 65536u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.calls(), 5u);
  EXPECT_EQ(s.timed(), 3u) << "persists and drains are timed, flushes and reads are not";
  EXPECT_GE(s.last_ns, t);
}

TEST(LaneStats, QuantilesAreTheBoundsOfTheirBuckets) {
  LaneTotals t;
  EXPECT_EQ(t.quantile_ns(0.5), 0u) << "none timed";
  t.latency[1] = 50;  // <= 2 us
  t.latency[4] = 49;  // <= 20 us
  t.latency[22] = 1;  // > 10 s
  EXPECT_EQ(t.quantile_ns(0.5), 2'000u);
  EXPECT_EQ(t.quantile_ns(0.51), 20'000u);
  EXPECT_EQ(t.quantile_ns(0.99), 20'000u);
  EXPECT_EQ(t.quantile_ns(1.0), UINT64_MAX);
  // A request served takes the bucket of its time.
  LaneCounters c;
  c.served(LaneOp::kPersist, 8, LaneCounters::now_ns() - 3'000'000, false);  // 3 ms ago
  LaneTotals one;
  c.add_to(one);
  EXPECT_EQ(one.quantile_ns(0.5), 5'000'000u);
  EXPECT_GE(one.served_ns, 3'000'000u);
}

TEST(SessionStatus, KeepsItsPoolsTotalsAfterTheCloseAndMeasuresItsRate) {
  SessionStatus s(7, "alice", "10.0.0.1", LaneCounters::now_ns());
  auto counters = std::make_shared<TargetCounters>(2);
  s.pool_opened(PoolInfo{"p.set", 4, 2, "tcp", "disk", "GPSPM", "persistent"}, counters);
  const int64_t t0 = 1'000'000'000;
  s.sample(t0);
  for (int i = 0; i < 30; ++i) counters->lane(i % 2)->served(LaneOp::kPersist, 10, 0, false);
  s.sample(t0 + 3'000'000'000);  // 30 calls in 3 s
  SessionStatus::View v = s.view();
  EXPECT_TRUE(v.open);
  EXPECT_EQ(v.totals.persists, 30u);
  EXPECT_DOUBLE_EQ(v.calls_per_s, 10.0);
  s.pool_closed();
  counters->lane(0)->served(LaneOp::kPersist, 10, 0, false);  // after the close: not its own
  v = s.view();
  EXPECT_FALSE(v.open);
  EXPECT_EQ(v.totals.persists, 30u);
  EXPECT_EQ(v.totals.persisted_bytes, 300u);
  EXPECT_EQ(v.pool.pool_set, "p.set");
}

StatusSnapshot sample_snapshot(const std::string &cn) {
  StatusSnapshot s;
  s.version = "1.0.0";
  s.uptime_s = 12.5;
  s.now_ns = 10'000'000'000;
  s.sessions_started = 3;
  s.sessions_reopened = 1;
  SessionStatus st(4, cn, "127.0.0.1", 1);
  auto counters = std::make_shared<TargetCounters>(1);
  st.pool_opened(PoolInfo{"p\"q.set", 2, 1, "verbs", "disk", "GPSPM", "visible"}, counters,
                 [] { return int64_t{1'500'000'000}; });
  // The live session's persist took 30 ms: in the 50 ms bucket, however
  // long this thread is kept off the CPU (below 20 ms) before served()
  // reads the clock.
  counters->lane(0)->served(LaneOp::kPersist, 4096, LaneCounters::now_ns() - 30'000'000, false);
  counters->lane(0)->served(LaneOp::kRead, 512, LaneCounters::now_ns(), false);
  counters->lane(0)->served(LaneOp::kFlush, 1000, 0, false);  // 1000 B acknowledged visible
  counters->lane(0)->visible(1000);
  counters->lane_returned();    // its lane connected again once
  counters->lane(0)->probed();  // and probed for a late reply twice
  counters->lane(0)->probed();
  s.sessions.push_back(st.view());
  s.sessions.back().totals.last_ns = 9'000'000'000;
  s.caps = {{"max-handshakes", 2, 128}, {"max-sessions", 1, 512}};
  s.refusals = {{"has no pool set directory", 2}, {"say \"no\"\\now", 1}};
  LaneTotals ended;
  ended.persists = 5;
  ended.persisted_bytes = 500;
  ended.latency[3] = 5;
  ended.served_ns = 40'000;
  s.ended = {{"bob", ended}};
  return s;
}

TEST(StatusRender, TextHasALinePerSessionTheCapsAndTheRefusals) {
  const std::string t = render_text(sample_snapshot("alice"));
  EXPECT_NE(t.find("rpmemd 1.0.0, up 12 s: 1 session (3 since start, 1 reopened after a restart)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("session 4: 'alice' from 127.0.0.1, p\"q.set, lanes 1/2 asked, verbs, disk, "
                   "GPSPM, visible; persisted 4096 B in 1 calls"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("acknowledged persistent 4096 B, visible 1000 B, the oldest not persistent yet "
                   "1.500 s;"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("read 512 B in 1, 0 failed, 1 lanes back, 2 probes;"), std::string::npos) << t;
  EXPECT_NE(t.find("last request 1.0 s ago"), std::string::npos) << t;
  EXPECT_NE(t.find("max-handshakes               2 / 128"), std::string::npos) << t;
  EXPECT_NE(t.find("       2  has no pool set directory"), std::string::npos) << t;
}

TEST(StatusRender, JsonEscapesWhatANameMayHold) {
  const std::string j = render_json(sample_snapshot("al\"ice\n\\"));
  EXPECT_NE(j.find("\"client\":\"al\\\"ice\\u000a\\\\\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"pool_set\":\"p\\\"q.set\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"persists\":1,\"bytes_persisted\":4096"), std::string::npos) << j;
  EXPECT_NE(j.find("\"bytes_read\":512"), std::string::npos) << j;
  EXPECT_NE(j.find("\"lanes_back\":1,\"probes\":2,"), std::string::npos) << j;
  EXPECT_NE(j.find("\"durability\":\"visible\",\"bytes_acknowledged_persistent\":4096,"
                   "\"bytes_acknowledged_visible\":1000,"
                   "\"unpersisted_seconds\":1.500"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"max-handshakes\":{\"used\":2,\"max\":128}"), std::string::npos) << j;
  EXPECT_NE(j.find("\"has no pool set directory\":2"), std::string::npos) << j;
  EXPECT_NE(j.find("\"seconds_since_last_request\":1.000"), std::string::npos) << j;
  // Balanced and one object.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < j.size(); ++i) {
    if (in_string) {
      if (j[i] == '\\')
        ++i;
      else if (j[i] == '"')
        in_string = false;
      continue;
    }
    if (j[i] == '"') in_string = true;
    if (j[i] == '{' || j[i] == '[') ++depth;
    if (j[i] == '}' || j[i] == ']') --depth;
    ASSERT_GE(depth, 0) << j;
    ASSERT_FALSE(j[i] == '\n' && i + 1 != j.size()) << "one line";
  }
  EXPECT_EQ(depth, 0) << j;
}

TEST(StatusRender, MetricsFollowTheTextFormatAndSumEndedAndLiveSessions) {
  std::map<std::string, double> v;
  const std::string m = render_metrics(sample_snapshot("al\"ice\n\\"));
  ASSERT_EQ(rpmem_test::prom_check(m, &v), "") << m;
  EXPECT_EQ(v["rpmemd_bytes_persisted_total{client=\"al\\\"ice\\n\\\\\"}"], 4096) << m;
  EXPECT_EQ(v["rpmemd_bytes_persisted_total{client=\"bob\"}"], 500) << m;
  EXPECT_EQ(v["rpmemd_requests_total{client=\"bob\",op=\"persist\"}"], 5) << m;
  EXPECT_EQ(v["rpmemd_lanes_back_total{client=\"al\\\"ice\\n\\\\\"}"], 1) << m;
  EXPECT_EQ(v["rpmemd_lanes_back_total{client=\"bob\"}"], 0) << m;
  EXPECT_EQ(v["rpmemd_lane_probes_total{client=\"al\\\"ice\\n\\\\\"}"], 2) << m;
  EXPECT_EQ(v["rpmemd_lane_probes_total{client=\"bob\"}"], 0) << m;
  // The live session's 4096 B persisted and 1000 B flushed visible; bob's 500.
  EXPECT_EQ(v["rpmemd_bytes_acknowledged_total{client=\"al\\\"ice\\n\\\\\",level=\"persistent\"}"],
            4096)
      << m;
  EXPECT_EQ(v["rpmemd_bytes_acknowledged_total{client=\"al\\\"ice\\n\\\\\",level=\"visible\"}"],
            1000)
      << m;
  EXPECT_EQ(v["rpmemd_bytes_acknowledged_total{client=\"bob\",level=\"persistent\"}"], 500) << m;
  EXPECT_EQ(v["rpmemd_visible_unpersisted_seconds"], 1.5) << m;
  EXPECT_EQ(v["rpmemd_pools_open{medium=\"disk\"}"], 1) << m;
  EXPECT_EQ(v["rpmemd_sessions"], 1);
  EXPECT_EQ(v["rpmemd_sessions_reopened_total"], 1);
  EXPECT_EQ(v["rpmemd_persist_seconds_count"], 6) << "bob's 5 and the live session's 1";
  EXPECT_EQ(v["rpmemd_persist_seconds_bucket{le=\"1e-05\"}"], 5) << m;  // bob's
  EXPECT_EQ(v["rpmemd_persist_seconds_bucket{le=\"0.02\"}"], 5) << m;
  EXPECT_EQ(v["rpmemd_persist_seconds_bucket{le=\"0.05\"}"], 6) << m;  // and the live one
  EXPECT_EQ(v["rpmemd_refusals_total{reason=\"has no pool set directory\"}"], 2);
  EXPECT_EQ(v["rpmemd_refusals_total{reason=\"say \\\"no\\\"\\\\now\"}"], 1) << m;
  EXPECT_EQ(v["rpmemd_cap_max{cap=\"max-sessions\"}"], 512);
  // The checker itself refuses what the format does not allow.
  EXPECT_NE(rpmem_test::prom_check("rpmemd_x_total 1\n"), "") << "no TYPE";
  EXPECT_NE(rpmem_test::prom_check("# TYPE rpmemd_x counter\nrpmemd_x 1\n"), "") << "_total";
  EXPECT_NE(rpmem_test::prom_check("# TYPE a gauge\na{l=\"x\\y\"} 1\n"), "") << "escape";
  EXPECT_NE(rpmem_test::prom_check("# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
                                   "h_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n"),
            "")
      << "not cumulative";
}

// A client that ran ahead reports its pool catching up; a pool whose
// run-ahead session ended without a close waits behind: the text, the JSON
// and the metrics say so.
TEST(StatusRender, APoolCatchingUpAndAPoolBehindAreShown) {
  StatusSnapshot s = sample_snapshot("alice");
  SessionStatus st(5, "carol", "127.0.0.1", 1);
  st.pool_opened(PoolInfo{"c.set", 2, 1, "tcp", "ram", "", "persistent"},
                 std::make_shared<TargetCounters>(1));
  st.catch_up({rpmem::proto::PoolSync::kResyncing, 3 << 20, 1 << 20, 60'000});
  s.sessions.push_back(st.view());
  s.behind = {{"d.set", "dave", s.now_ns - 90'000'000'000}};
  const std::string t = render_text(s);
  EXPECT_NE(t.find("; pool catching up, behind for 60 s: 3145728 B to send again, 1048576 B sent"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("pool d.set of 'dave': may be behind its master for 90 s"), std::string::npos)
      << t;
  const std::string j = render_json(s);
  EXPECT_NE(j.find("\"sync\":\"catching up\",\"resync_bytes_left\":3145728,"
                   "\"resync_bytes_done\":1048576"),
            std::string::npos)
      << j;
  EXPECT_NE(
      j.find("\"behind\":[{\"pool_set\":\"d.set\",\"client\":\"dave\",\"behind_seconds\":90.000}]"),
      std::string::npos)
      << j;
  std::map<std::string, double> v;
  const std::string m = render_metrics(s);
  ASSERT_EQ(rpmem_test::prom_check(m, &v), "") << m;
  EXPECT_EQ(v["rpmemd_pools{state=\"catching up\"}"], 1) << m;
  EXPECT_EQ(v["rpmemd_pools{state=\"behind\"}"], 1) << m;
  EXPECT_EQ(v["rpmemd_pools{state=\"in sync\"}"], 1) << m;
  EXPECT_EQ(v["rpmemd_resync_bytes_left"], 3 << 20) << m;
  EXPECT_GE(v["rpmemd_behind_seconds"], 90) << m;
}

TEST(StatusRender, SystemdStatusIsOneShortLine) {
  const std::string s = render_systemd_status(sample_snapshot("alice"));
  EXPECT_EQ(s, "1 session; handshakes 2/128; 3 refused since start");
}

}  // namespace
}  // namespace rpmemd
