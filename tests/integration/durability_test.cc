// SPDX-License-Identifier: BSD-3-Clause
// The durability levels: a visible pool (RPMEM_DURABILITY=visible) and
// visible calls keep every acknowledged byte through rpmemd's kill -9, and
// are written back within the daemon's bound; a daemon that grants only
// persistent refuses a visible pool before creating it; bad values and
// flags are EINVAL. What a power cut does to them is the VM's
// (scripts/test-powercut.sh).
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kParts{{kPool, "p.part0"}};

class Durability : public ::testing::Test {
 protected:
  // Each test sets the pool's level it needs (ctest -L visible sets it for
  // every test).
  void SetUp() override { ::unsetenv("RPMEM_DURABILITY"); }
  void TearDown() override { ::unsetenv("RPMEM_DURABILITY"); }
  RPMEMpool *create(unsigned *nlanes = nullptr) {
    unsigned n = 2;
    return rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, nlanes ? nlanes : &n, nullptr);
  }
  // Writes [off, +len) with `seed` and persists it with `flags`.
  void persist(RPMEMpool *rpp, size_t off, size_t len, uint8_t seed, unsigned flags) {
    local_.fill(off, len, seed);
    ASSERT_EQ(rpmem_persist(rpp, off, len, 0, flags), 0) << rpmem_errormsg();
  }

  Target target_;
  LocalPool local_{kPool};
};

TEST_F(Durability, AVisiblePoolKeepsEveryAcknowledgedByteThroughAKillOfTheDaemon) {
  set_env("RPMEM_DURABILITY", "visible");
  set_env("RPMEM_CMD", target_.rpmemd_cmd("--visible-writeback 600000"));  // only the close
  target_.write_poolset("p.set", kParts, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_TRUE(target_.log_shows("durability: visible")) << target_.log_text();
  persist(rpp, 0, 4096, 1, 0);
  persist(rpp, 8192, 3 * 4096 + 5, 2, RPMEM_PERSIST_RELAXED);
  persist(rpp, kMiB, kMiB, 3, 0);  // past one lane buffer: through the mapping
  local_.fill(3 * kMiB, 64 * 1024, 4);
  ASSERT_EQ(rpmem_flush(rpp, 3 * kMiB, 64 * 1024, 1, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_drain(rpp, 1, 0), 0) << rpmem_errormsg();
  const pid_t pid = target_.rpmemd_pid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(wait_gone(pid, std::chrono::seconds(10)));
  rpmem_close(rpp);  // the target is gone: whatever it says
  // In the part file, through the page cache...
  const std::pair<size_t, size_t> acknowledged[] = {
      {0, 4096}, {8192, 3 * 4096 + 5}, {kMiB, kMiB}, {3 * kMiB, 64 * 1024}};
  std::vector<uint8_t> r = target_.remote_pool(kParts, true);
  ASSERT_EQ(r.size(), kPool);
  for (auto [off, len] : acknowledged)
    EXPECT_TRUE(same_bytes(r.data(), local_.data(), off, len)) << off;
  // ... and through the next open.
  LocalPool back(kPool, 99);
  unsigned n = 2;
  rpp = rpmem_open("127.0.0.1", "p.set", back.data(), kPool, &n, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target_.log_text();
  ASSERT_EQ(rpmem_read(rpp, back.data(), 0, kPool, 0), 0) << rpmem_errormsg();
  for (auto [off, len] : acknowledged)
    EXPECT_TRUE(same_bytes(back.data(), local_.data(), off, len)) << off;
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
}

// On a disk the visible bytes wait in the page cache, and the daemon writes
// them back within its bound: it says so in its log. A persistent pool
// never has any to write back.
TEST_F(Durability, VisibleBytesOnADiskAreWrittenBackWithinTheBound) {
  if (test_medium() != "disk") GTEST_SKIP() << "visible is persistent on " << test_medium();
  set_env("RPMEM_CMD", target_.rpmemd_cmd("--visible-writeback 200"));
  target_.write_poolset("p.set", kParts, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_TRUE(target_.log_shows("durability: persistent (visible calls granted)"))
      << target_.log_text();
  persist(rpp, 4096, 4096, 5, 0);
  ::usleep(400 * 1000);
  EXPECT_EQ(target_.log_text().find("visible bytes written back"), std::string::npos)
      << "persistent calls leave nothing to write back\n"
      << target_.log_text();
  persist(rpp, 8192, 4096, 6, RPMEM_PERSIST_VISIBLE);
  EXPECT_TRUE(target_.log_shows("visible bytes written back")) << target_.log_text();
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  std::vector<uint8_t> r = target_.remote_pool(kParts, true);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 4096, 8192));
}

TEST_F(Durability, ADaemonThatGrantsOnlyPersistentRefusesAVisiblePoolBeforeCreatingIt) {
  set_env("RPMEM_DURABILITY", "visible");
  set_env("RPMEM_CMD", target_.rpmemd_cmd("--durability-visible no"));
  target_.write_poolset("p.set", kParts, "OPTION NOHDRS\n");
  errno = 0;
  EXPECT_EQ(create(), nullptr);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_NE(std::string(rpmem_errormsg()).find("Durability level not granted by the target"),
            std::string::npos)
      << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.part_path("p.part0"))) << "nothing created";
  EXPECT_TRUE(target_.log_shows("durability-visible is no")) << target_.log_text();
  // Without the pool's level, a call that asks for visible is persistent.
  ::unsetenv("RPMEM_DURABILITY");
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  persist(rpp, 4096, 4096, 7, RPMEM_PERSIST_VISIBLE);
  local_.fill(16384, 100, 8);
  ASSERT_EQ(rpmem_flush(rpp, 16384, 100, 0, RPMEM_FLUSH_VISIBLE), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_drain(rpp, 0, RPMEM_DRAIN_VISIBLE), 0) << rpmem_errormsg();
  std::vector<uint8_t> r = target_.remote_pool(kParts, true);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 4096, 4096));
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 16384, 100));
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
}

TEST_F(Durability, ABadLevelOrPairOfFlagsIsEinvalNamingTheCause) {
  target_.write_poolset("p.set", kParts, "OPTION NOHDRS\n");
  set_env("RPMEM_DURABILITY", "fast");
  errno = 0;
  EXPECT_EQ(create(), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(std::string(rpmem_errormsg()).find("RPMEM_DURABILITY: invalid value 'fast'"),
            std::string::npos)
      << rpmem_errormsg();
  set_env("RPMEM_DURABILITY", "persistent");
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_TRUE(target_.log_shows("durability: persistent")) << target_.log_text();
  errno = 0;
  EXPECT_EQ(rpmem_persist(rpp, 4096, 64, 0, RPMEM_PERSIST_VISIBLE | RPMEM_PERSIST_PERSISTENT), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(std::string(rpmem_errormsg()).find("both the visible and the persistent level"),
            std::string::npos)
      << rpmem_errormsg();
  EXPECT_EQ(rpmem_drain(rpp, 0, RPMEM_DRAIN_VISIBLE | RPMEM_DRAIN_PERSISTENT), -1);
  EXPECT_EQ(rpmem_flush(rpp, 4096, 64, 0, 1U << 3), -1);
  EXPECT_EQ(rpmem_drain(rpp, 0, RPMEM_PERSIST_RELAXED), -1) << "a drain is never relaxed";
  // A visible pool's call may ask for persistent, the way a database asks
  // for a durable commit.
  persist(rpp, 8192, 4096, 9, RPMEM_PERSIST_PERSISTENT);
  std::vector<uint8_t> r = target_.remote_pool(kParts, true);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 8192, 4096));
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
}

}  // namespace
}  // namespace rpmem_test
