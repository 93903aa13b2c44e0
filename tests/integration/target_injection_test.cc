// SPDX-License-Identifier: BSD-3-Clause
// Targets that try to smuggle options into ssh ("-oProxyCommand=...",
// "-F<file>", "-E<file>", "-l<user>", a user "-x"), or hold whitespace or
// control characters: refused with EINVAL by create, open and remove, with
// the real /usr/bin/ssh and with the stand-in, before anything is started.
#include "tests/integration/harness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "librpmem.h"

namespace rpmem_test {
namespace {

using ::testing::HasSubstr;

constexpr size_t kPool = 4 * kMiB;

struct Hostile {
  std::string target;
  std::string why;  // in rpmem_errormsg()
};

class TargetInjection : public ::testing::TestWithParam<const char *> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "/usr/bin/ssh" && ::access("/usr/bin/ssh", X_OK) != 0)
      GTEST_SKIP() << "OpenSSH client not installed";
    set_env("RPMEM_SSH", GetParam());
    // A remote command line that is a valid host name too: had ssh taken the
    // target for an option, it would take "rpmemd" for the destination and
    // run the ProxyCommand.
    if (std::string(GetParam()) == "/usr/bin/ssh") set_env("RPMEM_CMD", "rpmemd");
    target_.write_poolset("p.set", {{kPool, "p.part0"}});
    // What ssh would run or write if it took a target for options.
    marker_ = target_.dir() + "/ran";
    std::ofstream(target_.dir() + "/ssh_config")
        << "Host *\n  ProxyCommand touch " << marker_ << "\n";
  }

  std::vector<Hostile> cases() const {
    const std::string d = target_.dir();
    return {
        {"-oProxyCommand=touch " + marker_, "begins with '-'"},
        {"-oProxyCommand=touch${IFS}" + marker_, "begins with '-'"},
        {"-F" + d + "/ssh_config", "begins with '-'"},
        {"-F" + d + "/ssh_config:22", "begins with '-'"},
        {"-E" + marker_, "begins with '-'"},
        {"-lroot", "begins with '-'"},
        {"-lroot@127.0.0.1", "user '-lroot' begins with '-'"},
        {"-x@127.0.0.1", "user '-x' begins with '-'"},
        {"-oProxyCommand=touch" + marker_ + "@127.0.0.1", "begins with '-'"},
        {"user@-oProxyCommand=touch" + marker_, "host '-oProxyCommand"},
        {"[-oProxyCommand=touch" + marker_ + "]:22", "begins with '-'"},
        {"rpmems://-x@127.0.0.1", "user '-x' begins with '-'"},
        {"127.0.0.1 -oProxyCommand=touch" + marker_, "holds whitespace"},
        {"us er@127.0.0.1", "user 'us er' holds whitespace"},
        {"127.0.0.1\t-F" + d + "/ssh_config", "holds whitespace"},
        {"127.0.0.1\n-F" + d + "/ssh_config", "host '127.0.0.1\\n-F"},
        {"127.0.0.1\x01", "host '127.0.0.1\\x01' holds a control character"},
        {"u\x7f@127.0.0.1", "user 'u\\x7f' holds a control character"},
        {"\x1b[31m@127.0.0.1", "holds a control character"},
    };
  }

  void expect_refused(const Hostile &h, const char *op) {
    EXPECT_EQ(errno, EINVAL) << op << " " << h.target;
    std::string msg = rpmem_errormsg();
    EXPECT_THAT(msg, HasSubstr("invalid target")) << op;
    EXPECT_THAT(msg, HasSubstr(h.why)) << op << " " << h.target;
    for (char c : msg) EXPECT_FALSE(c > 0 && c < 0x20) << "control character in: " << msg;
    EXPECT_FALSE(file_exists(marker_)) << op << " " << h.target << ": ssh ran the command";
  }

  Target target_;
  LocalPool local_{kPool};
  std::string marker_;
};

TEST_P(TargetInjection, CreateFailsWithEinvalAndStartsNothing) {
  for (const auto &h : cases()) {
    unsigned nlanes = 1;
    errno = 0;
    RPMEMpool *rpp =
        rpmem_create(h.target.c_str(), "p.set", local_.data(), kPool, &nlanes, nullptr);
    EXPECT_EQ(rpp, nullptr) << h.target;
    if (rpp) rpmem_close(rpp);
    expect_refused(h, "rpmem_create");
  }
  EXPECT_FALSE(file_exists(target_.pid_file())) << "rpmemd was started";
}

TEST_P(TargetInjection, OpenFailsWithEinvalAndStartsNothing) {
  for (const auto &h : cases()) {
    unsigned nlanes = 1;
    rpmem_pool_attr attr{};
    errno = 0;
    RPMEMpool *rpp = rpmem_open(h.target.c_str(), "p.set", local_.data(), kPool, &nlanes, &attr);
    EXPECT_EQ(rpp, nullptr) << h.target;
    if (rpp) rpmem_close(rpp);
    expect_refused(h, "rpmem_open");
  }
  EXPECT_FALSE(file_exists(target_.pid_file())) << "rpmemd was started";
}

TEST_P(TargetInjection, RemoveFailsWithEinvalAndStartsNothing) {
  for (const auto &h : cases()) {
    errno = 0;
    EXPECT_EQ(rpmem_remove(h.target.c_str(), "p.set", 0), -1) << h.target;
    expect_refused(h, "rpmem_remove");
  }
  EXPECT_FALSE(file_exists(target_.pid_file())) << "rpmemd was started";
  EXPECT_TRUE(file_exists(target_.poolset_dir() + "/p.set"));
}

INSTANTIATE_TEST_SUITE_P(RealSshAndStandIn, TargetInjection,
                         ::testing::Values("/usr/bin/ssh", FAKE_SSH_PATH),
                         [](const auto &param) { return param.index == 0 ? "ssh" : "stand_in"; });

// A well-formed target still works next to them, with the stand-in.
TEST(TargetInjectionControl, PlainTargetIsServed) {
  Target target;
  target.write_poolset("p.set", {{kPool, "p.part0"}});
  LocalPool local(kPool);
  unsigned nlanes = 1;
  rpmem_pool_attr attr = sample_attr(3);
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), kPool, &nlanes, &attr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target.log_text();
  EXPECT_EQ(rpmem_close(rpp), 0);
}

}  // namespace
}  // namespace rpmem_test
