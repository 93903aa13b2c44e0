// SPDX-License-Identifier: BSD-3-Clause
// rpmemd --persist-apm: on a pool that is persistent memory (here forced,
// PMEM_IS_PMEM_FORCE=1, as PMDK's rpmem_basic/TEST10), the Appliance
// Persistency Method is answered and logged, over tcp as over verbs, and
// the bytes land; on any other pool GPSPM is.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

class Apm : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("PMEM_IS_PMEM_FORCE"); }

  // Creates a pool with rpmemd --persist-apm, writes through every kind of
  // call, checks the part file byte for byte.
  void replicate(bool pmem) {
    if (pmem) set_env("PMEM_IS_PMEM_FORCE", "1");  // inherited by rpmemd
    set_env("RPMEM_CMD", target_.rpmemd_cmd("--persist-apm"));
    target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
    unsigned nlanes = 2;
    RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, &nlanes, nullptr);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
    local_.fill(0, kPool, 77);
    ASSERT_EQ(rpmem_persist(rpp, 8192, 100000, 0, 0), 0) << rpmem_errormsg();
    ASSERT_EQ(rpmem_persist(rpp, kMiB, kMiB, 1, RPMEM_PERSIST_RELAXED), 0) << rpmem_errormsg();
    for (size_t i = 0; i < 20; ++i)
      ASSERT_EQ(rpmem_flush(rpp, 3 * kMiB + i * 5000, 4000, i % 2, i % 3 ? RPMEM_FLUSH_RELAXED : 0),
                0)
          << rpmem_errormsg();
    ASSERT_EQ(rpmem_drain(rpp, 0, 0), 0) << rpmem_errormsg();
    ASSERT_EQ(rpmem_drain(rpp, 1, 0), 0) << rpmem_errormsg();
    ASSERT_EQ(rpmem_deep_persist(rpp, 2 * kMiB, 4096, 0), 0) << rpmem_errormsg();
    local_.fill(2 * kMiB, 4096, 78);
    ASSERT_EQ(rpmem_deep_persist(rpp, 2 * kMiB, 4096, 0), 0) << rpmem_errormsg();
    auto r = target_.remote_pool(kOnePart, false);
    EXPECT_TRUE(same_bytes(r.data(), local_.data(), 8192, 100000));
    EXPECT_TRUE(same_bytes(r.data(), local_.data(), kMiB, kMiB));
    for (size_t i = 0; i < 20; ++i)
      EXPECT_TRUE(same_bytes(r.data(), local_.data(), 3 * kMiB + i * 5000, 4000)) << i;
    EXPECT_TRUE(same_bytes(r.data(), local_.data(), 2 * kMiB, 4096));
    EXPECT_EQ(r[0], 0) << "nothing wrote offset 0";
    EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  }

  Target target_;
  LocalPool local_{kPool};
};

TEST_F(Apm, PmemPoolIsServedWithApmAndEveryByteLands) {
  replicate(true);
  const std::string log = target_.log_text();
  if (log.find("lane windows") != std::string::npos) {
    // verbs on fsdax: the NIC cannot write into the pool, so nothing could
    // read it back by RDMA READ: GPSPM, and the reason is logged.
    EXPECT_NE(log.find("    persist method: General Purpose Server Persistency Method\n"
                       "    persist flush: pmem_persist\n"),
              std::string::npos)
        << log;
    return;
  }
  // PMDK's lines for APM, then ours.
  EXPECT_NE(log.find("persistency policy:\n"
                     "    persist method: Appliance Persistency Method\n"
                     "    persist flush: none\n"
                     "    medium: persistent memory\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("    nlanes: 2\n    persist method: Appliance Persistency Method\n"),
            std::string::npos)
      << "the response names APM\n"
      << log;
  if (!verbs_only()) {
    EXPECT_NE(log.find("APM over tcp: each write is flushed into the pool as it lands"),
              std::string::npos)
        << log;
  }
}

TEST_F(Apm, PoolThatIsNotPmemIsServedWithGpspm) {
  if (test_medium() == "pmem") GTEST_SKIP() << "every pool here is on persistent memory";
  replicate(false);
  const std::string log = target_.log_text();
  // The configuration says what was asked (APM); the policy what is done.
  EXPECT_NE(log.find("persistency policy:\n"
                     "    persist method: General Purpose Server Persistency Method\n"
                     "    persist flush: pmem_msync\n"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace rpmem_test
