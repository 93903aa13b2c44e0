// SPDX-License-Identifier: BSD-3-Clause
// The power-cut test's client: creates the two-part pool of schedule.h on
// TARGET through rpmemd (RPMEM_SSH / RPMEM_CMD as set by the caller), then
// runs the seeded schedule with one thread per lane until each lane has run
// MAX_STEPS steps or the power goes. On stdout, with one write(2) per line so
// that each line reaches the console whole and at once:
//   start seed=S lanes=L size=P
//   issue LANE INDEX KIND OFFSET LENGTH FLAGS   before a write is handed over
//   ack LANE INDEX LEVEL MS                     the call returned 0: every
//                                               write of LANE up to INDEX is
//                                               acknowledged, at LEVEL p
//                                               (persistent) or v (visible),
//                                               at MS (CLOCK_MONOTONIC, ms)
//   done | error ...
//   powercut_client TARGET POOL_SET SEED LANES MAX_STEPS [PERSISTENT_EVERY]
// With PERSISTENT_EVERY (a pool of RPMEM_DURABILITY=visible), every
// PERSISTENT_EVERY-th step of a lane asks for the persistent level and the
// others take the pool's, visible; a deep persist, which is always
// persistent (and writes the whole pool back), is a visible persist then.
// With POWERCUT_CRASH_AFTER=N and POWERCUT_RPMEMD_PID=FILE (where RPMEM_CMD
// writes rpmemd's pid), the lanes stop after N acknowledgements in all;
// then rpmemd is killed (SIGKILL), the pool closed and opened again (a new
// rpmemd), one persistent persist made of a block whose bytes are already
// there, and the client says "cut-now" and waits for the power to go:
//   crash PID | reopened | cut-now
#include "tests/powercut/schedule.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "librpmem.h"

namespace {

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = std::min(static_cast<size_t>(n), sizeof line - 2);
  line[len++] = '\n';
  for (size_t done = 0; done < len;) {
    ssize_t w = ::write(STDOUT_FILENO, line + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

[[noreturn]] void fail(unsigned lane, uint64_t index, const char *what) {
  say("error lane %u index %" PRIu64 " %s: %s (errno %d)", lane, index, what, rpmem_errormsg(),
      errno);
  std::_Exit(1);
}

uint64_t now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// Acknowledgements so far, and the crash's: the lanes stop at it.
std::atomic<uint64_t> g_acks{0};
uint64_t g_stop_at = UINT64_MAX;

void run_lane(RPMEMpool *rpp, uint8_t *pool, uint64_t seed, unsigned lane, unsigned lanes,
              unsigned long max_steps, unsigned long persistent_every) {
  powercut::LaneSchedule schedule(seed, lane, lanes);
  for (unsigned long n = 0; n < max_steps && g_acks.load() < g_stop_at; ++n) {
    const powercut::Step s = schedule.next();
    if (s.blocks.empty()) continue;
    // The level of this step's calls: the pool's, or persistent.
    const bool persistent = persistent_every == 0 || n % persistent_every == 0;
    const unsigned level = persistent_every == 0 ? 0 : persistent ? RPMEM_PERSIST_PERSISTENT : 0;
    for (const powercut::Block &b : s.blocks) {
      powercut::Content(seed, lane, b.index).fill(pool, b.off, b.len);
      say("issue %u %" PRIu64 " %s %zu %zu %u", lane, b.index, powercut::kind_name(s.kind), b.off,
          b.len, b.flush_flags);
      int r = 0;
      switch (s.kind) {
        case powercut::Kind::kPersist:
          r = rpmem_persist(rpp, b.off, b.len, lane, level);
          break;
        case powercut::Kind::kPersistRelaxed:
          r = rpmem_persist(rpp, b.off, b.len, lane, RPMEM_PERSIST_RELAXED | level);
          break;
        case powercut::Kind::kDeepPersist:
          r = persistent_every == 0 ? rpmem_deep_persist(rpp, b.off, b.len, lane)
                                    : rpmem_persist(rpp, b.off, b.len, lane, level);
          break;
        case powercut::Kind::kFlushBatch:
          r = rpmem_flush(rpp, b.off, b.len, lane, b.flush_flags | level);
          break;
      }
      if (r != 0) fail(lane, b.index, powercut::kind_name(s.kind));
    }
    if (s.kind == powercut::Kind::kFlushBatch && rpmem_drain(rpp, lane, level) != 0)
      fail(lane, s.blocks.back().index, "drain");
    say("ack %u %" PRIu64 " %c %" PRIu64, lane, s.blocks.back().index, persistent ? 'p' : 'v',
        now_ms());
    g_acks.fetch_add(1);
  }
}

// rpmemd dies (SIGKILL: its visible bytes stay in the page cache, counted
// nowhere), the pool is opened again on a new rpmemd and one block is made
// persistent; then the power may go. Never returns.
[[noreturn]] void crash_and_reopen(RPMEMpool *rpp, uint8_t *pool, const char *target,
                                   const char *set, const char *pid_file) {
  long pid = 0;
  if (FILE *f = std::fopen(pid_file, "r")) {
    if (std::fscanf(f, "%ld", &pid) != 1) pid = 0;
    std::fclose(f);
  }
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), SIGKILL) != 0) {
    say("error crash: no rpmemd to kill (%s)", pid_file);
    std::_Exit(1);
  }
  say("crash %ld", pid);
  rpmem_close(rpp);  // the target is gone: it fails, and frees the pool
  unsigned nlanes = 1;
  rpmem_pool_attr attr{};
  RPMEMpool *again = nullptr;
  for (int i = 0; i < 50 && !again; ++i) {  // the killed rpmemd's locks go with its exit
    again = rpmem_open(target, set, pool, powercut::kPoolSize, &nlanes, &attr);
    if (!again) ::usleep(100000);
  }
  if (!again) {
    say("error reopen: %s (errno %d)", rpmem_errormsg(), errno);
    std::_Exit(1);
  }
  say("reopened");
  if (rpmem_persist(again, powercut::kHdrSize, 4096, 0, RPMEM_PERSIST_PERSISTENT) != 0) {
    say("error persist after the reopen: %s", rpmem_errormsg());
    std::_Exit(1);
  }
  say("cut-now");
  for (;;) ::pause();
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s TARGET POOL_SET SEED LANES MAX_STEPS [PERSISTENT_EVERY]\n",
                 argv[0]);
    return 2;
  }
  const unsigned long persistent_every = argc == 7 ? std::strtoul(argv[6], nullptr, 10) : 0;
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  unsigned lanes = static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10));
  const unsigned long max_steps = std::strtoul(argv[5], nullptr, 10);
  if (lanes == 0) return 2;

  void *addr = ::mmap(nullptr, powercut::kPoolSize, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) return 1;
  auto *pool = static_cast<uint8_t *>(addr);

  rpmem_pool_attr attr{};
  std::memcpy(attr.signature, "PWRCUT", 6);
  attr.major = 1;
  unsigned nlanes = lanes;
  RPMEMpool *rpp = rpmem_create(argv[1], argv[2], pool, powercut::kPoolSize, &nlanes, &attr);
  if (rpp == nullptr) {
    say("error create: %s (errno %d)", rpmem_errormsg(), errno);
    return 1;
  }
  lanes = std::min(lanes, nlanes);
  say("start seed=%" PRIu64 " lanes=%u size=%zu", seed, lanes, powercut::kPoolSize);

  const char *crash_after = std::getenv("POWERCUT_CRASH_AFTER");
  const char *pid_file = std::getenv("POWERCUT_RPMEMD_PID");
  if (crash_after && pid_file) g_stop_at = std::strtoull(crash_after, nullptr, 10);
  std::vector<std::thread> threads;
  for (unsigned lane = 0; lane < lanes; ++lane)
    threads.emplace_back(run_lane, rpp, pool, seed, lane, lanes, max_steps, persistent_every);
  for (auto &t : threads) t.join();
  if (g_stop_at != UINT64_MAX) crash_and_reopen(rpp, pool, argv[1], argv[2], pid_file);
  if (rpmem_close(rpp) != 0) {
    say("error close: %s", rpmem_errormsg());
    return 1;
  }
  say("done");
  return 0;
}
