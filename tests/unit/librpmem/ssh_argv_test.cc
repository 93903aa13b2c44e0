// SPDX-License-Identifier: BSD-3-Clause
// Tests of the ssh command line: the exact argv, and shell quoting that a
// real /bin/sh turns back into the very same arguments without running
// anything.
#include "librpmem/ssh_channel.h"
#include "tests/scratch_dir.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace rpmem {
namespace {

using Argv = std::vector<std::string>;

TargetAddress target(const char *s) {
  auto r = parse_target(s);
  EXPECT_TRUE(r.ok()) << s;
  return r.ok() ? r.value() : TargetAddress{};
}

TEST(SshArgv, IsSshTBatchModeDestinationAndOneCommandLine) {
  Settings s;
  EXPECT_EQ(ssh_argv(s, target("host"), "rpmemd", {}),
            (Argv{"ssh", "-T", "-oBatchMode=yes", "--", "host", "rpmemd"}));
  EXPECT_EQ(ssh_argv(s, target("user@host"), "rpmemd", {"--remove", "pool.set", "--force"}),
            (Argv{"ssh", "-T", "-oBatchMode=yes", "--", "user@host",
                  "rpmemd '--remove' 'pool.set' '--force'"}));
}

TEST(SshArgv, PassesPortWithDashPFirst) {
  Settings s;
  EXPECT_EQ(ssh_argv(s, target("user@[::1]:1234"), "rpmemd", {"a"}),
            (Argv{"ssh", "-p", "1234", "-T", "-oBatchMode=yes", "--", "user@::1", "rpmemd 'a'"}));
  EXPECT_EQ(ssh_argv(s, target("host:22"), "rpmemd", {}),
            (Argv{"ssh", "-p", "22", "-T", "-oBatchMode=yes", "--", "host", "rpmemd"}));
}

TEST(SshArgv, UsesRpmemSshAndLeavesCommandUnquoted) {
  Settings s;
  s.ssh = "/opt/bin/myssh";
  // RPMEM_CMD is run by the remote shell as it is (it may carry options).
  EXPECT_EQ(ssh_argv(s, target("::1"), "rpmemd -f /etc/r.conf", {"x y"}),
            (Argv{"/opt/bin/myssh", "-T", "-oBatchMode=yes", "--", "::1",
                  "rpmemd -f /etc/r.conf 'x y'"}));
}

TEST(ShellQuote, WrapsInSingleQuotesAndEscapesQuotes) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("abc"), "'abc'");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("'"), "''\\'''");
}

// Runs `line` with /bin/sh -c (popen) and returns its stdout.
std::string run_sh(const std::string &line) {
  std::string out;
  FILE *p = ::popen(line.c_str(), "r");
  EXPECT_NE(p, nullptr);
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << line;
  return out;
}

class ShellQuoteSh : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path();
    marker_ = dir_ + "/pwned";
  }
  rpmem_test::ScratchDir scratch_{"rpmem-quote"};

  // Arguments that would each run `touch <marker>` if they reached the
  // shell unquoted.
  Argv nasty() const {
    const std::string m = marker_;
    return {"plain",
            "two words",
            "; touch " + m,
            "$(touch " + m + ")",
            "`touch " + m + "`",
            "' ; touch " + m + " ; '",
            "\" ; touch " + m + " ; \"",
            "a'b\"c",
            "''''",
            "\\",
            "\\'",
            "$HOME ${HOME} $0 $1 $@ $*",
            "| touch " + m,
            "&& touch " + m,
            "> " + m,
            "*",
            "~",
            "#comment",
            "-n",
            "line1\nline2; touch " + m,
            "\t tab",
            "",
            "\xc3\xa9t\xc3\xa9"};
  }
  bool marker_exists() const { return std::filesystem::exists(marker_); }

  std::string dir_, marker_;
};

TEST_F(ShellQuoteSh, EveryArgumentRoundTripsThroughSh) {
  for (const auto &arg : nasty()) {
    EXPECT_EQ(run_sh("printf %s " + shell_quote(arg)), arg);
    EXPECT_FALSE(marker_exists()) << "executed: " << arg;
  }
}

TEST_F(ShellQuoteSh, SshCommandLineRunsOnlyTheCommandWithItsArguments) {
  Settings s;
  const Argv args = nasty();
  // The remote shell gets argv.back(); printf stands in for rpmemd and
  // prints every argument it receives, terminated by a NUL-free marker.
  Argv argv = ssh_argv(s, target("host"), "printf '%s<END>'", args);
  std::string want;
  for (const auto &a : args) want += a + "<END>";
  EXPECT_EQ(run_sh(argv.back()), want);
  EXPECT_FALSE(marker_exists());
}

}  // namespace
}  // namespace rpmem
