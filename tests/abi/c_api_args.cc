// SPDX-License-Identifier: BSD-3-Clause
// Argument checks of the C API that need no daemon, through the shared
// library itself: NULL and misaligned arguments fail with EINVAL and PMDK's
// messages, errno is always positive, and rpmem_errormsg() is per thread.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>

#include "librpmem.h"

namespace {

using ::testing::HasSubstr;

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

class CApiArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = std::aligned_alloc(kPage, 4 * kPage);
    ASSERT_NE(pool_, nullptr);
  }
  void TearDown() override { std::free(pool_); }

  using Connect = RPMEMpool *(*)(const char *, const char *, void *, size_t, unsigned *,
                                 rpmem_pool_attr *);
  // rpmem_create and rpmem_open behind one signature.
  static RPMEMpool *create(const char *t, const char *p, void *a, size_t s, unsigned *n,
                           rpmem_pool_attr *attr) {
    return rpmem_create(t, p, a, s, n, attr);
  }
  static RPMEMpool *open(const char *t, const char *p, void *a, size_t s, unsigned *n,
                         rpmem_pool_attr *attr) {
    return rpmem_open(t, p, a, s, n, attr);
  }

  // Calls both; each must return NULL with EINVAL and a message containing
  // `msg`.
  void expect_einval(const char *target, const char *pool_set, void *addr, size_t size,
                     unsigned *nlanes, const std::string &msg) {
    for (Connect f : {&CApiArgs::create, &CApiArgs::open}) {
      errno = 0;
      rpmem_pool_attr attr{};
      EXPECT_EQ(f(target, pool_set, addr, size, nlanes, &attr), nullptr);
      EXPECT_EQ(errno, EINVAL);
      EXPECT_THAT(rpmem_errormsg(), HasSubstr(msg));
    }
  }

  void *pool_ = nullptr;
  unsigned nlanes_ = 4;
};

TEST_F(CApiArgs, NullTargetIsEinval) {
  expect_einval(nullptr, "pool.set", pool_, 4 * kPage, &nlanes_, "target");
}

TEST_F(CApiArgs, NullPoolSetNameIsEinval) {
  expect_einval("host", nullptr, pool_, 4 * kPage, &nlanes_, "pool set");
}

TEST_F(CApiArgs, NullPoolAddressIsEinvalWithPmdkMessage) {
  expect_einval("host", "pool.set", nullptr, 4 * kPage, &nlanes_, "invalid pool address");
}

TEST_F(CApiArgs, MisalignedPoolAddressIsEinvalWithPmdkMessage) {
  const std::string msg =
      "Pool address must be aligned to page size (" + std::to_string(kPage) + ")";
  expect_einval("host", "pool.set", static_cast<char *>(pool_) + 8, 2 * kPage, &nlanes_, msg);
  expect_einval("host", "pool.set", static_cast<char *>(pool_) + kPage / 2, 2 * kPage, &nlanes_,
                msg);
}

TEST_F(CApiArgs, MisalignedPoolSizeIsEinvalWithPmdkMessage) {
  const std::string msg = "Pool size must be aligned to page size (" + std::to_string(kPage) + ")";
  expect_einval("host", "pool.set", pool_, 4 * kPage - 1, &nlanes_, msg);
  expect_einval("host", "pool.set", pool_, 1, &nlanes_, msg);
}

TEST_F(CApiArgs, ZeroPoolSizeIsEinvalWithPmdkMessage) {
  expect_einval("host", "pool.set", pool_, 0, &nlanes_, "invalid pool size");
}

TEST_F(CApiArgs, NullNlanesIsEinvalWithPmdkMessage) {
  expect_einval("host", "pool.set", pool_, 4 * kPage, nullptr, "lanes pointer cannot be NULL");
}

TEST_F(CApiArgs, ZeroNlanesIsEinvalWithPmdkMessage) {
  unsigned zero = 0;
  expect_einval("host", "pool.set", pool_, 4 * kPage, &zero, "number of lanes must be positive");
  EXPECT_EQ(zero, 0u);
}

TEST_F(CApiArgs, ChecksRunInPmdkOrder) {
  // Address before size before lanes, as in PMDK's rpmem_check_args.
  unsigned zero = 0;
  expect_einval("host", "pool.set", static_cast<char *>(pool_) + 1, 0, &zero,
                "Pool address must be aligned");
  expect_einval("host", "pool.set", pool_, 3, nullptr, "Pool size must be aligned");
  expect_einval("host", "pool.set", pool_, 0, nullptr, "invalid pool size");
}

TEST_F(CApiArgs, NullHandleIsEinvalForEveryCall) {
  char buf[8];
  rpmem_pool_attr attr{};
  errno = 0;
  EXPECT_EQ(rpmem_set_attr(nullptr, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_set_attr(nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_close(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_flush(nullptr, 4096, 8, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_drain(nullptr, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_persist(nullptr, 4096, 8, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_deep_persist(nullptr, 4096, 8, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_read(nullptr, buf, 4096, 8, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_read(nullptr, nullptr, 4096, 8, 0), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(CApiRemove, NullTargetOrPoolSetIsEinval) {
  errno = 0;
  EXPECT_EQ(rpmem_remove(nullptr, "pool.set", 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(rpmem_remove("host", nullptr, 0), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(CApiRemove, InvalidFlagsAreEinvalWithPmdkMessage) {
  for (int flags : {4, 8, 0x100, -1, RPMEM_REMOVE_FORCE | 4}) {
    errno = 0;
    EXPECT_EQ(rpmem_remove("host", "pool.set", flags), -1) << flags;
    EXPECT_EQ(errno, EINVAL) << flags;
    EXPECT_STREQ(rpmem_errormsg(), "invalid flags specified") << flags;
  }
}

TEST(CApiErrormsg, IsThreadLocal) {
  errno = 0;
  ASSERT_EQ(rpmem_remove("host", "pool.set", 4), -1);
  ASSERT_STREQ(rpmem_errormsg(), "invalid flags specified");
  std::string other_before, other_after;
  std::thread t([&] {
    other_before = rpmem_errormsg();  // a fresh thread has no message
    rpmem_check_version(2, 0);
    other_after = rpmem_errormsg();
  });
  t.join();
  EXPECT_EQ(other_before, "");
  EXPECT_EQ(other_after, "librpmem major version mismatch (need 2, found 1)");
  EXPECT_STREQ(rpmem_errormsg(), "invalid flags specified") << "another thread's error leaked";
}

TEST(CApiErrormsg, IsNeverNull) {
  std::thread t([] { EXPECT_NE(rpmem_errormsg(), nullptr); });
  t.join();
  EXPECT_NE(rpmem_errormsg(), nullptr);
}

TEST(CApiErrormsg, SettingTheMessageKeepsErrno) {
  errno = 0;
  ASSERT_EQ(rpmem_close(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 12345;
  EXPECT_NE(rpmem_check_version(9, 0), nullptr);
  EXPECT_EQ(errno, 12345);
}

TEST(CApiCheckVersion, MatchesPmdk) {
  EXPECT_EQ(rpmem_check_version(RPMEM_MAJOR_VERSION, RPMEM_MINOR_VERSION), nullptr);
  EXPECT_EQ(rpmem_check_version(1, 0), nullptr);
  EXPECT_STREQ(rpmem_check_version(1, 4), "librpmem minor version mismatch (need 4, found 3)");
  EXPECT_STREQ(rpmem_check_version(2, 0), "librpmem major version mismatch (need 2, found 1)");
  EXPECT_STREQ(rpmem_check_version(0, 3), "librpmem major version mismatch (need 0, found 1)");
  // The message is the thread's error message.
  const char *m = rpmem_check_version(1, 9);
  EXPECT_EQ(m, rpmem_errormsg());
}

}  // namespace
