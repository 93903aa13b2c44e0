// SPDX-License-Identifier: BSD-3-Clause
// Through real OpenSSH: a private sshd on a loopback port with throw-away
// host and user keys, and the real ssh client as RPMEM_SSH (through a
// one-line wrapper that adds -F, since RPMEM_SSH is a single word).
#include "tests/integration/harness.h"
#include "tests/integration/private_sshd.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

// Whether this machine has an IPv6 loopback address.
bool ipv6_loopback() {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

class RealSsh : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = PrivateSshd::unavailable(); !why.empty()) GTEST_SKIP() << why;
    std::vector<std::string> addresses{test_ip()};
    if (ipv6_loopback()) addresses.push_back("::1");
    std::string why;
    ASSERT_TRUE(sshd_.start(target_.dir(), addresses, free_port(), "", why)) << why;
    set_env("RPMEM_SSH", sshd_.ssh());
    port_ = sshd_.port();
    passwd *pw = ::getpwuid(::geteuid());
    user_ = pw ? pw->pw_name : "root";
  }

  std::string sshd_log() const { return sshd_.log(); }
  std::string target_string(const std::string &host) const { return sshd_.target(host); }

  // Create, persist, read back, close, open, check the part file.
  void replicate(const std::string &target) {
    target_.write_poolset("p.set", kOnePart);
    rpmem_pool_attr attr = sample_attr(21);
    unsigned nlanes = 2;
    RPMEMpool *rpp = rpmem_create(target.c_str(), "p.set", local_.data(), kPool, &nlanes, &attr);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\nsshd:\n"
                            << sshd_log() << "\nrpmemd:\n"
                            << target_.log_text();
    ASSERT_EQ(rpmem_persist(rpp, 4096, kPool - 4096, 0, 0), 0) << rpmem_errormsg();
    local_.fill(kMiB, 4096, 99);
    ASSERT_EQ(rpmem_flush(rpp, kMiB, 4096, 1, 0), 0);
    ASSERT_EQ(rpmem_drain(rpp, 1, 0), 0);
    std::vector<uint8_t> buf(8192);
    ASSERT_EQ(rpmem_read(rpp, buf.data(), kMiB - 4096, buf.size(), 1), 0);
    EXPECT_TRUE(same_bytes(buf.data() - (kMiB - 4096), local_.data(), kMiB - 4096, 8192));
    ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
    rpmem_pool_attr got{};
    rpp = rpmem_open(target.c_str(), "p.set", local_.data(), kPool, &nlanes, &got);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
    EXPECT_EQ(std::memcmp(&got, &attr, sizeof(got)), 0);
    ASSERT_EQ(rpmem_close(rpp), 0);
    auto r = target_.remote_pool(kOnePart, true);
    EXPECT_TRUE(same_bytes(r.data(), local_.data(), 4096, kPool - 4096));
    EXPECT_EQ(zombie_children(), 0);
  }

  Target target_;
  LocalPool local_{kPool};
  PrivateSshd sshd_;
  int port_ = 0;
  std::string user_;
};

TEST_F(RealSsh, ReplicatesOverIpv4Loopback) {
  replicate(target_string(test_ip()));
  // The daemon learnt its data address from SSH_CONNECTION.
  EXPECT_NE(target_.log_text().find("ssh connection: " + test_ip() + " "), std::string::npos)
      << target_.log_text();
}

TEST_F(RealSsh, ReplicatesOverIpv6LoopbackInBrackets) {
  if (!ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback";
  if (verbs_only()) GTEST_SKIP() << "no RDMA on loopback, and the VM's rxe0 has no IPv6 address";
  replicate(user_ + "@[::1]:" + std::to_string(port_));
  EXPECT_NE(target_.log_text().find("ssh connection: ::1 "), std::string::npos)
      << target_.log_text();
}

TEST_F(RealSsh, RemoveRunsTheDaemonThroughSsh) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  unsigned nlanes = 1;
  const std::string t = target_string(test_ip());
  RPMEMpool *rpp = rpmem_create(t.c_str(), "p.set", local_.data(), kPool, &nlanes, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << sshd_log();
  ASSERT_EQ(rpmem_close(rpp), 0);
  ASSERT_EQ(rpmem_remove(t.c_str(), "p.set", RPMEM_REMOVE_POOL_SET), 0) << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.part_path("p.part0")));
  EXPECT_FALSE(file_exists(target_.poolset_dir() + "/p.set"));
}

TEST_F(RealSsh, UnknownUserFailsWithEconnresetAndSshsMessage) {
  unsigned nlanes = 1;
  const std::string t = "no-such-user-xyz@" + test_ip() + ":" + std::to_string(port_);
  errno = 0;
  RPMEMpool *rpp = rpmem_create(t.c_str(), "p.set", local_.data(), kPool, &nlanes, nullptr);
  EXPECT_EQ(rpp, nullptr);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_STREQ(rpmem_errormsg(), "out-of-band connection failed: Connection reset by peer");
  // ssh's own words are in the library's log.
  EXPECT_NE(library_log().find("Permission denied"), std::string::npos) << library_log();
}

}  // namespace
}  // namespace rpmem_test
