// SPDX-License-Identifier: BSD-3-Clause
// The library reads its environment with secure_getenv: a program in
// secure-execution mode (here: a copy of secure_env/probe.c with a file
// capability, run as an unprivileged user, so the loader sets AT_SECURE)
// ignores the caller's RPMEM_SSH, RPMEM_CMD, RPMEM_LOG_LEVEL and
// RPMEM_LOG_FILE; the same program without the capability honours them.
#include "tests/integration/harness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace rpmem_test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr const char *kNobody = "65534";

class SecureEnv : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef RPMEM_TEST_SANITIZED
    GTEST_SKIP() << "not under sanitizers: the probe runs non-dumpable";
#endif
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (setcap, setpriv)";
    if (::access("/usr/sbin/setcap", X_OK) != 0 || ::access("/usr/bin/setpriv", X_OK) != 0)
      GTEST_SKIP() << "setcap (libcap2-bin) or setpriv (util-linux) not installed";
    dir_ = target_.dir();
    ::chmod(dir_.c_str(), 0777);  // the unprivileged user writes its markers here
    std::ofstream(dir_ + "/fake-ssh") << "#!/bin/sh\ntouch " << dir_ << "/ssh-ran\nexit 1\n";
    ::chmod((dir_ + "/fake-ssh").c_str(), 0755);
    for (const char *name : {"plain", "capable"}) {
      fs::copy_file(SECURE_ENV_PROBE_PATH, dir_ + "/" + name);
      ::chmod((dir_ + "/" + name).c_str(), 0755);
    }
    ASSERT_EQ(
        std::system(("/usr/sbin/setcap cap_net_bind_service+ep " + dir_ + "/capable").c_str()), 0);
  }

  // Runs copy `name` as nobody with the hostile environment; its stdout.
  std::string run_probe(const std::string &name) {
    std::string cmd = "cd " + dir_ + " && /usr/bin/setpriv --reuid=" + kNobody +
                      " --regid=" + kNobody + " --clear-groups env RPMEM_SSH=" + dir_ +
                      "/fake-ssh RPMEM_CMD='touch " + dir_ +
                      "/cmd-ran' RPMEM_LOG_LEVEL=4 RPMEM_LOG_FILE=" + dir_ + "/" + name +
                      ".log RPMEM_TIMEOUT=2 " + dir_ + "/" + name + " 127.0.0.1:1 2>&1";
    return command_output(cmd);
  }

  Target target_;
  std::string dir_;
};

TEST_F(SecureEnv, PlainProgramHonoursRpmemSshAndLogFile) {
  std::string out = run_probe("plain");
  EXPECT_THAT(out, HasSubstr("AT_SECURE=0"));
  EXPECT_THAT(out, HasSubstr("rpmem_remove=-1"));
  EXPECT_TRUE(file_exists(dir_ + "/ssh-ran")) << out;
  EXPECT_TRUE(file_exists(dir_ + "/plain.log")) << out;
}

TEST_F(SecureEnv, SecureExecutionIgnoresRpmemSshCmdAndLogVariables) {
  std::string out = run_probe("capable");
  ASSERT_THAT(out, HasSubstr("AT_SECURE=1")) << "the loader did not set AT_SECURE";
  EXPECT_THAT(out, HasSubstr("rpmem_remove=-1"));
  // The default "ssh" ran (and found no server on port 1), not RPMEM_SSH.
  EXPECT_FALSE(file_exists(dir_ + "/ssh-ran")) << out;
  EXPECT_FALSE(file_exists(dir_ + "/cmd-ran")) << out;
  EXPECT_FALSE(file_exists(dir_ + "/capable.log")) << out;
}

}  // namespace
}  // namespace rpmem_test
