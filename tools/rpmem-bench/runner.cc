// SPDX-License-Identifier: BSD-3-Clause
// Runs one operation on several lanes at once and times every call.
#include "tools/rpmem-bench/runner.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace rpmem_bench {
namespace {

using Clock = std::chrono::steady_clock;

enum Phase : int { kWait, kWarmup, kMeasure, kStop };

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds this process has used.
double process_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The live processes descended from this one: the daemons it started.
std::vector<long> descendants() {
  std::map<long, std::vector<long>> children;  // by parent
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const size_t close = stat.rfind(')');  // the name may hold spaces and ')'
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid) children[ppid].push_back(std::stol(name));
  }
  std::vector<long> out, todo = children[::getpid()];
  while (!todo.empty()) {
    const long pid = todo.back();
    todo.pop_back();
    out.push_back(pid);
    for (long c : children[pid]) todo.push_back(c);
  }
  return out;
}

// CPU seconds of every thread of `pids` (their tasks' schedstat:
// nanoseconds on a CPU).
double cpu_s_of(const std::vector<long> &pids) {
  double total = 0;
  for (long pid : pids) {
    std::error_code ec;
    for (const auto &t :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::ifstream in(t.path() / "schedstat");
      unsigned long long ns = 0;
      if (in >> ns) total += static_cast<double>(ns) / 1e9;
    }
  }
  return total;
}

}  // namespace

RunSamples run_lanes(const Options &opt, unsigned lanes, const Workload &w,
                     const std::string &label) {
  RunSamples out;
  out.lat_ns.resize(lanes);
  std::atomic<int> phase{kWait};
  std::atomic<unsigned> ready{0}, finished{0};
  std::atomic<uint64_t> done{0};  // measured calls, for the progress line
  std::mutex mu;                  // guards out.error*
  Clock::time_point start;        // written before phase becomes kMeasure
  std::vector<Clock::time_point> ends(lanes);
  std::vector<uint64_t> units(lanes, 0), allocs(lanes, 0);

  auto fail = [&](int err, const char *what) {
    std::lock_guard lock(mu);
    if (!out.error) {
      out.error = err;
      out.error_text = std::string(what) + ": " + std::strerror(err);
    }
    phase.store(kStop);
  };
  auto lane_main = [&](unsigned lane) {
    auto &lat = out.lat_ns[lane];
    lat.reserve(opt.count ? opt.count : uint64_t{1} << 18);
    ++ready;
    while (phase.load(std::memory_order_acquire) == kWait) std::this_thread::yield();
    uint64_t i = 0;
    while (phase.load(std::memory_order_acquire) == kWarmup) {
      if (int err = w.op(lane, i++)) return fail(err, "warm-up"), void(++finished);
    }
    const int64_t a0 = thread_allocs();
    uint64_t n = 0;
    while (phase.load(std::memory_order_relaxed) == kMeasure && (!opt.count || n < opt.count)) {
      auto t = Clock::now();
      int err = w.op(lane, i++);
      auto dt = Clock::now() - t;
      if (err) return fail(err, "measured run"), void(++finished);
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count();
      lat.push_back(static_cast<uint32_t>(std::min<int64_t>(ns, UINT32_MAX)));
      ++n;
      done.fetch_add(1, std::memory_order_relaxed);
    }
    if (w.finish) {
      if (int err = w.finish(lane)) return fail(err, "finish"), void(++finished);
    }
    ends[lane] = Clock::now();
    units[lane] = n * w.units;
    const int64_t a1 = thread_allocs();
    allocs[lane] = a0 < 0 ? 0 : static_cast<uint64_t>(a1 - a0);
    ++finished;
  };

  std::vector<std::thread> threads;
  threads.reserve(lanes);
  for (unsigned l = 0; l < lanes; ++l) threads.emplace_back(lane_main, l);
  while (ready.load() < lanes) std::this_thread::sleep_for(std::chrono::microseconds(100));
  phase.store(kWarmup, std::memory_order_release);
  static bool started_at = false;  // --start-at is for the first run only
  if (opt.start_at > 0 && !started_at) {
    started_at = true;
    const auto at = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(opt.start_at)));
    if (std::chrono::system_clock::now() >= at)
      fail(ETIME, "ready after --start-at");
    else
      std::this_thread::sleep_until(at);
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(opt.warmup_s));
  }
  // The daemons are found before the measured part: the walk of /proc is
  // not timed, and only their threads' counters are read around it.
  const std::vector<long> daemons = descendants();
  start = Clock::now();
  const double cpu0 = process_cpu_s(), daemon_cpu0 = cpu_s_of(daemons);
  int expected = kWarmup;
  phase.compare_exchange_strong(expected, kMeasure, std::memory_order_acq_rel);

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const bool show = opt.progress < 0 ? tty : opt.progress != 0;
  auto last_print = start;
  bool printed = false;
  while (finished.load() < lanes) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto now = Clock::now();
    if (!opt.count && seconds_between(start, now) >= opt.duration_s) {
      expected = kMeasure;
      phase.compare_exchange_strong(expected, kStop);
    }
    if (show && seconds_between(last_print, now) >= 1.0) {
      last_print = now;
      printed = true;
      double t = seconds_between(start, now);
      std::fprintf(stderr, "%s%-40s %6.1f s %12llu calls %12.0f calls/s%s", tty ? "\r" : "",
                   label.c_str(), t, static_cast<unsigned long long>(done.load()),
                   static_cast<double>(done.load()) / t, tty ? "" : "\n");
    }
  }
  for (auto &t : threads) t.join();
  out.cpu_s = process_cpu_s() - cpu0;
  out.daemon_cpu_s = cpu_s_of(daemons) - daemon_cpu0;
  if (printed && tty) std::fprintf(stderr, "\r\033[K");

  auto end = *std::max_element(ends.begin(), ends.end());
  out.seconds = seconds_between(start, end);
  for (unsigned l = 0; l < lanes; ++l) {
    out.ops += units[l];
    out.allocs += allocs[l];
  }
  return out;
}

}  // namespace rpmem_bench
