// SPDX-License-Identifier: BSD-3-Clause
// Faults that lose nothing: the client killed mid-persist, SIGTERM and
// SIGINT to rpmemd while lanes stream persists, a full file system at
// create. Whatever happens, every byte acknowledged as persistent is in the
// part file, and the pool is left durable and unlocked. (The target lost
// is loss_test.cc's.)
#include "tests/integration/harness.h"
#include "tests/integration/raw_peer.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

class Faults : public OnePartPool {};

TEST_F(Faults, ClientKilledMidPersistLeavesADurableUnlockedPool) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  auto [child, acks] = fork_piped([&](int to_parent) {
    unsigned nl = 1;
    RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, &nl, nullptr);
    if (!rpp) return 2;
    for (uint64_t v = 1;; ++v) {
      std::memcpy(local_.data() + 64, &v, 8);
      if (rpmem_persist(rpp, 64, (v % 2) ? 8 : kMiB, 0, 0)) return 3;
      if (::write(to_parent, &v, 8) != 8) return 4;  // acknowledged
    }
  });
  ASSERT_GE(child, 0);
  uint64_t acked = 0, v = 0;
  auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until && ::read(acks, &v, 8) == 8) acked = v;
  ASSERT_GT(acked, 0u) << "the client never persisted";
  pid_t daemon = target_.rpmemd_pid();
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  while (::read(acks, &v, 8) == 8) acked = v;  // acknowledgements still in the pipe
  ::close(acks);
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

// ---------------------------------------------------------------------------
// A small tmpfs as the target file system.

class FullFs : public ::testing::Test {
 protected:
  Target target_;
  std::string mnt_;
  bool mounted_ = false;
  void SetUp() override {
    mnt_ = target_.dir() + "/small";
    std::filesystem::create_directory(mnt_);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=3m") != 0)
      GTEST_SKIP() << "cannot mount a tmpfs: " << strerror(errno);
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
  }
};

TEST_F(FullFs, CreateFailsClearlyAndLeavesNoHalfMadePool) {
  struct Case {
    const char *what;
    std::vector<Part> parts;
    const char *options;
    bool attr;
  };
  std::vector<Case> cases{
      {"one part larger than the fs", {{4 * kMiB, "small/a.part0"}}, "OPTION NOHDRS\n", false},
      {"second part does not fit",
       {{2 * kMiB, "small/b.part0"}, {2 * kMiB, "small/b.part1"}},
       "",
       true},
      {"single header, third part",
       {{2 * kMiB, "small/c.part0"}, {2 * kMiB, "small/c.part1"}, {2 * kMiB, "small/c.part2"}},
       "OPTION SINGLEHDR\n",
       true},
  };
  int tried = 0;
  for (auto &c : cases) {
    SCOPED_TRACE(c.what);
    target_.write_poolset("full.set", c.parts, c.options);
    const size_t size = 4 * kMiB;  // what the client asks
    LocalPool local(size);
    unsigned nl = 1;
    rpmem_pool_attr attr = sample_attr(1);
    if (std::string(c.options) == "OPTION SINGLEHDR\n") attr.incompat_features = 1;
    auto start = Clock::now();
    RPMEMpool *rpp =
        rpmem_create("127.0.0.1", "full.set", local.data(), size, &nl, c.attr ? &attr : nullptr);
    EXPECT_EQ(rpp, nullptr);
    if (rpp) rpmem_close(rpp);
    EXPECT_EQ(errno, EREMOTEIO) << rpmem_errormsg();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
    EXPECT_NE(target_.log_text().find("No space left on device"), std::string::npos)
        << target_.log_text();
    for (auto &e : std::filesystem::directory_iterator(mnt_))
      ADD_FAILURE() << "left behind: " << e.path();
    ++tried;
  }
  EXPECT_EQ(tried, 3);
  // The file system is empty again: a pool that fits is created.
  target_.write_poolset("fits.set", {{2 * kMiB, "small/f.part0"}}, "OPTION NOHDRS\n");
  LocalPool local(2 * kMiB, 8);
  unsigned nl = 1;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "fits.set", local.data(), 2 * kMiB, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  ASSERT_EQ(rpmem_persist(rpp, 0, 2 * kMiB, 0, 0), 0);
  EXPECT_EQ(rpmem_close(rpp), 0);
  EXPECT_TRUE(
      same_bytes(read_file(target_.part_path("small/f.part0")).data(), local.data(), 0, 2 * kMiB));
}

// ---------------------------------------------------------------------------
// SIGINT and SIGTERM while every lane streams persists.

class Signals : public ::testing::TestWithParam<int> {};

TEST_P(Signals, StopTheDaemonCleanlyKeepingEveryAcknowledgedByte) {
  Target target;
  target.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  LocalPool local(kPool);
  unsigned nl = 4;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  ASSERT_EQ(nl, 4u);
  std::vector<std::atomic<uint64_t>> acked(nl);
  std::vector<int> errs(nl, 0);
  std::vector<std::thread> threads;
  for (unsigned lane = 0; lane < nl; ++lane) {
    threads.emplace_back([&, lane] {
      uint8_t *slot = local.data() + lane * kMiB;
      for (uint64_t v = 1;; ++v) {
        std::memcpy(slot, &v, 8);
        if (rpmem_persist(rpp, lane * kMiB, (v % 3 == 0) ? 128 * 1024 : 8, lane, 0)) {
          errs[lane] = errno;
          return;
        }
        acked[lane] = v;
      }
    });
  }
  // The signal comes while every lane streams: after each has had a
  // persist acknowledged (a test beside this one may hold the CPUs for a
  // while), and some more.
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until &&
         std::any_of(acked.begin(), acked.end(), [](const auto &a) { return a.load() == 0; }))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pid_t pid = target.rpmemd_pid();
  ASSERT_EQ(::kill(pid, GetParam()), 0);
  for (auto &t : threads) t.join();
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(10)));
  EXPECT_NE(target.log_text().find("signal received"), std::string::npos) << target.log_text();
  for (unsigned lane = 0; lane < nl; ++lane) {
    EXPECT_EQ(errs[lane], ECONNRESET) << lane;
    EXPECT_GT(acked[lane].load(), 0u) << lane;
  }
  rpmem_close(rpp);
  auto r = target.remote_pool(kOnePart, false);
  for (unsigned lane = 0; lane < nl; ++lane) {
    uint64_t v;
    std::memcpy(&v, r.data() + lane * kMiB, 8);
    EXPECT_GE(v, acked[lane].load()) << "lane " << lane << " lost an acknowledged value";
  }
  unsigned one = 1;
  RPMEMpool *again = rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &one, nullptr);
  ASSERT_NE(again, nullptr) << "still locked: " << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(again), 0);
  EXPECT_EQ(zombie_children(), 0);
}

INSTANTIATE_TEST_SUITE_P(Daemon, Signals, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto &param_info) {
                           return param_info.param == SIGINT ? "Sigint" : "Sigterm";
                         });

}  // namespace
}  // namespace rpmem_test
