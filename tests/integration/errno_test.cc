// SPDX-License-Identifier: BSD-3-Clause
// Every documented errno of the API, against a real rpmemd: what the call
// returns, what rpmem_errormsg() says, and that a bad argument does not
// poison the handle.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <string>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

class Errno : public ::testing::Test {
 protected:
  Target target_;
  LocalPool local_{kPool};
  unsigned nlanes_ = 2;

  // Expects create/open to fail with `err` and a message containing `msg`.
  void expect_create_fails(const char *set, const rpmem_pool_attr *attr, int err,
                           const std::string &msg, size_t size = kPool,
                           const char *target = "127.0.0.1") {
    errno = 0;
    RPMEMpool *rpp = rpmem_create(target, set, local_.data(), size, &nlanes_, attr);
    EXPECT_EQ(rpp, nullptr);
    EXPECT_EQ(errno, err) << rpmem_errormsg();
    EXPECT_NE(std::string(rpmem_errormsg()).find(msg), std::string::npos)
        << "message: " << rpmem_errormsg();
    if (rpp) rpmem_close(rpp);
  }
  void expect_open_fails(const char *set, int err, const std::string &msg) {
    errno = 0;
    RPMEMpool *rpp = rpmem_open("127.0.0.1", set, local_.data(), kPool, &nlanes_, nullptr);
    EXPECT_EQ(rpp, nullptr);
    EXPECT_EQ(errno, err) << rpmem_errormsg();
    EXPECT_NE(std::string(rpmem_errormsg()).find(msg), std::string::npos)
        << "message: " << rpmem_errormsg();
    if (rpp) rpmem_close(rpp);
  }
  RPMEMpool *create_ok(const char *set, const rpmem_pool_attr *attr) {
    RPMEMpool *rpp = rpmem_create("127.0.0.1", set, local_.data(), kPool, &nlanes_, attr);
    EXPECT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target_.log_text();
    return rpp;
  }
};

TEST_F(Errno, MissingPoolSetIsEnoent) {
  expect_create_fails("nope.set", nullptr, ENOENT,
                      "Pool set or its part doesn't exist or it is unavailable");
  expect_open_fails("nope.set", ENOENT, "Pool set or its part doesn't exist");
}

TEST_F(Errno, UnreadablePoolSetIsEacces) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  ::chmod((target_.poolset_dir() + "/p.set").c_str(), 0600);
  // The daemon runs as nobody, who may not read root's 0600 file.
  std::ofstream(target_.dir() + "/rpmemd.log").close();
  ::chmod((target_.dir() + "/rpmemd.log").c_str(), 0666);
  set_env("RPMEM_CMD", "exec setpriv --reuid=nobody --regid=nogroup --clear-groups " RPMEMD_PATH
                       " -c " +
                           target_.dir() + "/rpmemd.conf");
  expect_create_fails("p.set", nullptr, EACCES, "Pool set permission denied");
}

TEST_F(Errno, CreatingAnExistingPoolIsEexist) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(1);
  RPMEMpool *rpp = create_ok("p.set", &attr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_close(rpp), 0);
  expect_create_fails("p.set", &attr, EEXIST, "Pool already exists");
}

TEST_F(Errno, OpeningAPoolInUseIsEbusy) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create_ok("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  expect_open_fails("p.set", EBUSY, "Pool already in use");
  // The first session is undisturbed.
  EXPECT_EQ(rpmem_persist(rpp, 0, 4096, 0, 0), 0);
  ASSERT_EQ(rpmem_close(rpp), 0);
  // Once closed, the pool is unlocked.
  RPMEMpool *again = rpmem_open("127.0.0.1", "p.set", local_.data(), kPool, &nlanes_, nullptr);
  EXPECT_NE(again, nullptr) << rpmem_errormsg();
  if (again) {
    EXPECT_EQ(rpmem_close(again), 0);
  }
}

TEST_F(Errno, PoolLargerThanTheRemoteOneIsEfbigAndCreateLeavesNothing) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  LocalPool big(2 * kPool);
  errno = 0;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", big.data(), 2 * kPool, &nlanes_, nullptr);
  EXPECT_EQ(rpp, nullptr);
  EXPECT_EQ(errno, EFBIG) << rpmem_errormsg();
  EXPECT_STREQ(rpmem_errormsg(), "Invalid pool size");
  EXPECT_FALSE(file_exists(target_.part_path("p.part0"))) << "a failed create left its part";
}

TEST_F(Errno, HeaderOptionsThatDoNotMatchTheAttributesAreEinval) {
  target_.write_poolset("hdr.set", kOnePart);
  expect_create_fails("hdr.set", nullptr, EINVAL, "Invalid pool set configuration");
  target_.write_poolset("nohdr.set", {{kPool, "q.part0"}}, "OPTION NOHDRS\n");
  rpmem_pool_attr attr = sample_attr(2);
  expect_create_fails("nohdr.set", &attr, EINVAL, "Invalid pool set configuration");
  target_.write_poolset("single.set", {{kPool, "s.part0"}}, "OPTION SINGLEHDR\n");
  expect_create_fails("single.set", &attr, EINVAL, "Invalid pool set configuration");
  EXPECT_FALSE(file_exists(target_.part_path("p.part0")));
}

TEST_F(Errno, PoolSetNamesOutsideTheDirectoryAreEinval) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  const std::string abs = target_.poolset_dir() + "/p.set";
  expect_create_fails(abs.c_str(), nullptr, EINVAL, "Invalid pool descriptor");
  // A pool set just outside the directory, reached with "..".
  std::ofstream(target_.dir() + "/outside.set")
      << "PMEMPOOLSET\nOPTION NOHDRS\n"
      << kPool << " " << target_.part_path("o.part") << "\n";
  expect_create_fails("../outside.set", nullptr, EINVAL, "Invalid pool descriptor");
  ::symlink((target_.dir() + "/outside.set").c_str(),
            (target_.poolset_dir() + "/link.set").c_str());
  expect_create_fails("link.set", nullptr, EINVAL, "Invalid pool descriptor");
  EXPECT_FALSE(file_exists(target_.part_path("o.part")));
}

TEST_F(Errno, NoTransportEnabledIsEnomedium) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  set_env("RPMEM_ENABLE_SOCKETS", "0");
  set_env("RPMEM_ENABLE_VERBS", "0");
  expect_create_fails("p.set", nullptr, ENOMEDIUM, "cannot find provider");
  ::unsetenv("RPMEM_ENABLE_VERBS");
}

TEST_F(Errno, DaemonThatDoesNotStartIsEconnreset) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  set_env("RPMEM_CMD", "echo 'rpmemd: not here' >&2; exit 127");
  expect_create_fails("p.set", nullptr, ECONNRESET, "out-of-band connection failed");
  // PMDK's text exactly; the remote shell's stderr is in the library's log.
  EXPECT_STREQ(rpmem_errormsg(), "out-of-band connection failed: Connection reset by peer");
  EXPECT_NE(library_log().find("rpmemd: not here"), std::string::npos) << library_log();
}

TEST_F(Errno, BadDaemonConfigIsEinval) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  std::ofstream(target_.dir() + "/bad.conf") << "no-such-key = 1\n";
  set_env("RPMEM_CMD", RPMEMD_PATH " -c " + target_.dir() + "/bad.conf");
  expect_create_fails("p.set", nullptr, EINVAL, "out-of-band connection failed");
}

TEST_F(Errno, GarbageFromTheDaemonIsEproto) {
  set_env("RPMEM_CMD", "printf 'this is not rpmemd'");
  expect_create_fails("p.set", nullptr, EPROTO, "out-of-band connection failed");
}

TEST_F(Errno, NewerProtocolMajorIsEprotonosupport) {
  // A hello frame: type 1, size 12, protocol 2.0, status 0, tcp.
  set_env("RPMEM_CMD",
          "printf '\\001\\000\\000\\000\\014\\000\\000\\000\\002\\000\\000\\000"
          "\\000\\000\\000\\000\\002\\000\\000\\000'");
  expect_create_fails("p.set", nullptr, EPROTONOSUPPORT, "Protocol version number mismatch");
}

TEST_F(Errno, BadTargetStringsAreEinval) {
  // PMDK's texts: a parse failure, and a bad ssh port found when the
  // out-of-band connection is set up. Which check failed is in the log.
  const std::string parse = "parsing target node address failed: Invalid argument";
  const std::string port = "out-of-band connection failed: Invalid argument";
  expect_create_fails("p.set", nullptr, EINVAL, parse, kPool, "[::1");
  expect_create_fails("p.set", nullptr, EINVAL, parse, kPool, "user@");
  expect_create_fails("p.set", nullptr, EINVAL, port, kPool, "127.0.0.1:x");
  expect_create_fails("p.set", nullptr, EINVAL, port, kPool, "127.0.0.1:0");
  expect_create_fails("p.set", nullptr, EINVAL, port, kPool, "127.0.0.1:65536");
}

TEST_F(Errno, BadDataPathArgumentsAreEinvalAndDoNotPoisonTheHandle) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(4);
  RPMEMpool *rpp = create_ok("p.set", &attr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(nlanes_, 2u);
  struct Case {
    const char *what;
    int rc;
    const char *msg;
  };
  uint8_t buf[64];
  const Case cases[] = {
      {"persist flags", rpmem_persist(rpp, 4096, 64, 0, 8), "invalid flags (0x8)"},
      {"flush flags", rpmem_flush(rpp, 4096, 64, 0, 16), "invalid flags (0x10)"},
      {"drain flags", rpmem_drain(rpp, 0, 1), "invalid flags (0x1)"},
      {"persist in header", rpmem_persist(rpp, 100, 64, 0, 0),
       "offset (100) in pool is less than 4096 bytes"},
      {"deep persist in header", rpmem_deep_persist(rpp, 4095, 2, 0), "less than 4096"},
      {"flush in header", rpmem_flush(rpp, 0, 64, 0, 0), "less than 4096"},
      {"lane", rpmem_persist(rpp, 4096, 64, 2, 0), "invalid lane number"},
      {"drain lane", rpmem_drain(rpp, 7, 0), "invalid lane number"},
      {"read lane", rpmem_read(rpp, buf, 4096, 64, 2), "read operation failed: Invalid argument"},
      {"beyond the pool", rpmem_persist(rpp, kPool - 8, 16, 0, 0), "exceeds pool size"},
      {"offset past the end", rpmem_persist(rpp, kPool + 4096, 1, 0, 0), "exceeds pool size"},
      {"overflowing range", rpmem_persist(rpp, 8192, SIZE_MAX - 4096, 0, 0), "exceeds pool size"},
      {"read beyond", rpmem_read(rpp, buf, kPool - 8, 16, 0), "read operation failed"},
      {"read overflow", rpmem_read(rpp, buf, 8, SIZE_MAX, 0), "read operation failed"},
      {"NULL buffer", rpmem_read(rpp, nullptr, 4096, 8, 0), "invalid buffer"},
  };
  for (const auto &c : cases) EXPECT_EQ(c.rc, -1) << c.what;
  // errno and message of the last case, then each again one by one.
  EXPECT_EQ(rpmem_persist(rpp, 4096, 64, 0, 8), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(rpmem_errormsg(), "invalid flags (0x8)");
  EXPECT_EQ(rpmem_persist(rpp, 100, 64, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(rpmem_errormsg(), "offset (100) in pool is less than 4096 bytes");
  EXPECT_EQ(rpmem_read(rpp, buf, 8, SIZE_MAX, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  // The handle still works, on every lane.
  EXPECT_EQ(rpmem_persist(rpp, 4096, 4096, 0, 0), 0) << rpmem_errormsg();
  EXPECT_EQ(rpmem_persist(rpp, 8192, 4096, 1, 0), 0) << rpmem_errormsg();
  EXPECT_EQ(rpmem_persist(rpp, kPool, 0, 1, 0), 0) << "an empty range at the end is fine";
  auto r = target_.remote_pool(kOnePart, true);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 4096, 8192));
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Errno, SetAttrOnAPoolWithoutHeadersIsEinval) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create_ok("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  rpmem_pool_attr attr = sample_attr(8);
  EXPECT_EQ(rpmem_set_attr(rpp, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(rpmem_errormsg(), "Invalid pool set configuration");
  EXPECT_EQ(rpmem_set_attr(rpp, nullptr), 0) << "zeroed attributes are fine without headers";
  EXPECT_EQ(rpmem_persist(rpp, 0, 64, 0, 0), 0) << "the handle still works";
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Errno, RemoveWithBadFlagsIsEinval) {
  EXPECT_EQ(rpmem_remove("127.0.0.1", "p.set", 4), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(rpmem_errormsg(), "invalid flags specified");
}

}  // namespace
}  // namespace rpmem_test
