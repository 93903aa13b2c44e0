// SPDX-License-Identifier: BSD-3-Clause
// The service's status: the tick (the sessions' rates, systemd's STATUS=
// and watchdog) and the snapshot the status channel tells.
#include "common/transport/lane_stats.h"
#include "rpmemd/service.h"
#include "rpmemd/service_conn.h"
#include "rpmemd/session.h"
#include "rpmemd/systemd_notify.h"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>

namespace rpmemd {

void Service::Loop::tick() {
  if (stopping_) return;
  const int64_t now = rpmem::transport::LaneCounters::now_ns();
  for (const auto &c : conns_)
    if (c->in_session && c->status) c->status->sample(now);
  const std::string status = "STATUS=" + render_systemd_status(snapshot(false));
  if (status != systemd_status_) {
    systemd::notify(status.c_str());
    systemd_status_ = status;
  }
  if (watchdog_usec_) systemd::notify("WATCHDOG=1");
  // Once a second, or twice per watchdog interval when that is shorter.
  auto every = std::chrono::microseconds(1000000);
  if (watchdog_usec_ && watchdog_usec_ / 2 < 1000000)
    every = std::chrono::microseconds(std::max<uint64_t>(watchdog_usec_ / 2, 1000));
  tick_.expires_after(every);
  tick_.async_wait([this](const boost::system::error_code &e) {
    if (!e) tick();
  });
}

namespace {

// Descriptors open in this process.
uint64_t open_descriptors() {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

}  // namespace

StatusSnapshot Service::Loop::snapshot(bool detailed) const {
  StatusSnapshot s;
  s.caps = {
      {"max-handshakes", admission_.handshakes(), config_.max_handshakes},
      {"max-connections", admission_.connections(), config_.max_connections},
      {"max-sessions", admission_.sessions(), config_.max_sessions},
  };
  s.refusals = refusals_.totals();
  if (!detailed) return s;
  s.version = RPMEM_VERSION;
  s.now_ns = rpmem::transport::LaneCounters::now_ns();
  s.uptime_s = static_cast<double>(s.now_ns - started_ns_) / 1e9;
  s.sessions_started = sessions_started_;
  s.sessions_reopened = sessions_reopened();
  unsigned per_client = 0;
  long lanes_per_client = 0;
  for (const auto &c : conns_) {
    if (!c->in_session || !c->status) continue;
    s.sessions.push_back(c->status->view());
    per_client = std::max(per_client, admission_.sessions_of(c->name));
    if (auto lanes = admission_.lanes_of(c->name))
      lanes_per_client = std::max(lanes_per_client, lanes->load());
  }
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  s.caps.insert(
      s.caps.end(),
      {{"max-sessions-per-client", per_client, config_.max_sessions_per_client},
       {"max-lanes-per-client", static_cast<uint64_t>(std::max(0L, lanes_per_client)),
        config_.max_lanes_per_client},
       {"descriptors (RLIMIT_NOFILE)", open_descriptors(), static_cast<uint64_t>(rl.rlim_cur)}});
  s.ended.assign(ended_.begin(), ended_.end());
  s.behind = behind_->list();
  return s;
}

}  // namespace rpmemd
