// SPDX-License-Identifier: BSD-3-Clause
// Faults: the daemon killed or stopped mid-stream, the client killed
// mid-persist, signals to rpmemd. Whatever happens, calls return within the
// bound, and every byte acknowledged as persistent is in the part file.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

class Faults : public ::testing::Test {
 protected:
  Target target_;
  LocalPool local_{kPool};
  unsigned nlanes_ = 4;

  RPMEMpool *create() {
    target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
    RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, &nlanes_, nullptr);
    EXPECT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
    return rpp;
  }
};

// Each lane writes a counter into its own 8-byte slots, one persist per
// value; the last acknowledged value of every slot is recorded.
struct Writer {
  std::atomic<uint64_t> acked{0};
  std::atomic<int> err{0};
  Clock::time_point failed_at{};
};

TEST_F(Faults, DaemonKilledMidStreamFailsEveryLaneAndKeepsAcknowledgedBytes) {
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(nlanes_, 4u);
  set_env("RPMEM_TIMEOUT", "2");
  std::vector<Writer> writers(nlanes_);
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  for (unsigned lane = 0; lane < nlanes_; ++lane) {
    threads.emplace_back([&, lane] {
      uint8_t *slot = local_.data() + lane * kMiB;
      for (uint64_t v = 1; !stop.load(); ++v) {
        std::memcpy(slot, &v, 8);
        // A larger range behind the slot keeps the pipe busy.
        size_t len = (v % 4 == 0) ? 256 * 1024 : 8;
        int rc = rpmem_persist(rpp, lane * kMiB, len, lane, 0);
        if (rc) {
          writers[lane].err = errno;
          writers[lane].failed_at = Clock::now();
          // Every later call fails fast with the same errno.
          if (rpmem_persist(rpp, lane * kMiB, 8, lane, 0) == 0) writers[lane].err = -1;
          return;
        }
        writers[lane].acked = v;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pid_t pid = target_.rpmemd_pid();
  ASSERT_GT(pid, 0);
  auto killed_at = Clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (auto &t : threads) t.join();
  stop = true;
  for (unsigned lane = 0; lane < nlanes_; ++lane) {
    EXPECT_EQ(writers[lane].err.load(), ECONNRESET) << "lane " << lane;
    EXPECT_LT(writers[lane].failed_at - killed_at, std::chrono::seconds(10)) << "lane " << lane;
    EXPECT_GT(writers[lane].acked.load(), 0u) << "lane " << lane << " never persisted";
  }
  EXPECT_EQ(rpmem_drain(rpp, 0, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  uint8_t buf[8];
  EXPECT_EQ(rpmem_read(rpp, buf, 0, 8, 1), -1);
  EXPECT_EQ(errno, ECONNRESET);
  auto close_start = Clock::now();
  EXPECT_EQ(rpmem_close(rpp), -1) << "the daemon is gone; close reports it but frees";
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_LT(Clock::now() - close_start, std::chrono::seconds(10));
  // What was acknowledged is in the file: each slot holds at least that value.
  auto r = target_.remote_pool(kOnePart, false);
  for (unsigned lane = 0; lane < nlanes_; ++lane) {
    uint64_t v;
    std::memcpy(&v, r.data() + lane * kMiB, 8);
    EXPECT_GE(v, writers[lane].acked.load()) << "lane " << lane << " lost an acknowledged value";
  }
  EXPECT_EQ(zombie_children(), 0);
}

TEST_F(Faults, StoppedDaemonGivesAnErrorWithinTheTimeout) {
  set_env("RPMEM_TIMEOUT", "1");
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_persist(rpp, 0, 4096, 0, 0), 0);
  pid_t pid = target_.rpmemd_pid();
  ASSERT_TRUE(stop_process(pid, std::chrono::seconds(5)));
  auto start = Clock::now();
  EXPECT_EQ(rpmem_persist(rpp, 4096, 4096, 0, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(5));
  // Sticky: other lanes fail at once.
  start = Clock::now();
  EXPECT_EQ(rpmem_persist(rpp, 8192, 64, 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(100));
  ::kill(pid, SIGKILL);
  ::kill(pid, SIGCONT);
  EXPECT_EQ(rpmem_close(rpp), -1);
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(5)));
  // With the peer gone, a new open works and finds the acknowledged bytes.
  ::unsetenv("RPMEM_TIMEOUT");
  RPMEMpool *again = rpmem_open("127.0.0.1", "p.set", local_.data(), kPool, &nlanes_, nullptr);
  ASSERT_NE(again, nullptr) << rpmem_errormsg();
  std::vector<uint8_t> buf(4096);
  ASSERT_EQ(rpmem_read(again, buf.data(), 0, 4096, 0), 0);
  EXPECT_TRUE(same_bytes(buf.data(), local_.data(), 0, 4096));
  EXPECT_EQ(rpmem_close(again), 0);
}

TEST_F(Faults, ClientKilledMidPersistLeavesADurableUnlockedPool) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    unsigned nl = 1;
    RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, &nl, nullptr);
    if (!rpp) ::_exit(2);
    for (uint64_t v = 1;; ++v) {
      std::memcpy(local_.data() + 64, &v, 8);
      if (rpmem_persist(rpp, 64, (v % 2) ? 8 : kMiB, 0, 0)) ::_exit(3);
      if (::write(fds[1], &v, 8) != 8) ::_exit(4);  // acknowledged
    }
  }
  ::close(fds[1]);
  uint64_t acked = 0, v = 0;
  auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until && ::read(fds[0], &v, 8) == 8) acked = v;
  ASSERT_GT(acked, 0u) << "the client never persisted";
  pid_t daemon = target_.rpmemd_pid();
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  while (::read(fds[0], &v, 8) == 8) acked = v;  // acknowledgements still in the pipe
  ::close(fds[0]);
  EXPECT_TRUE(wait_gone(daemon, std::chrono::seconds(10))) << "rpmemd did not exit";
  EXPECT_NE(target_.log_text().find("client disconnected"), std::string::npos);
  unsigned nl = 1;
  RPMEMpool *rpp = rpmem_open("127.0.0.1", "p.set", local_.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target_.log_text();
  uint64_t remote = 0;
  ASSERT_EQ(rpmem_read(rpp, &remote, 64, 8, 0), 0);
  EXPECT_GE(remote, acked);
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Faults, SigtermMakesThePoolDurableUnlocksAndExitsCleanly) {
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_persist(rpp, 0, kMiB, 0, 0), 0);
  pid_t pid = target_.rpmemd_pid();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(10)));
  EXPECT_NE(target_.log_text().find("signal received"), std::string::npos) << target_.log_text();
  EXPECT_EQ(rpmem_persist(rpp, 0, 64, 0, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  rpmem_close(rpp);
  unsigned nl = 1;
  RPMEMpool *again = rpmem_open("127.0.0.1", "p.set", local_.data(), kPool, &nl, nullptr);
  ASSERT_NE(again, nullptr) << "the pool is still locked: " << rpmem_errormsg();
  auto r = target_.remote_pool(kOnePart, false);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 0, kMiB));
  EXPECT_EQ(rpmem_close(again), 0);
}

}  // namespace
}  // namespace rpmem_test
