// SPDX-License-Identifier: BSD-3-Clause
// Names from the network land in rpmemd's log escaped: a pool set name with
// a newline (in a create or open request, or on the --remove command line)
// cannot forge a log line, nor carry a terminal escape sequence. The same
// holds for the library's log.
#include "tests/integration/harness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include "librpmem.h"

namespace rpmem_test {
namespace {

using ::testing::HasSubstr;

constexpr size_t kPool = 4 * kMiB;

// A forged line as rpmemd would write it, behind a newline in the name.
const std::string kForged = "rpmemd[1]: <err> forged line";
const std::string kEvilName = "evil\n" + kForged + "\r\x1b[2K\x7f.set";
const std::string kEscaped = "evil\\n" + kForged + "\\r\\x1b[2K\\x7f.set";

void expect_no_forged_line(const std::string &log) {
  std::istringstream lines(log);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_NE(line.rfind(kForged, 0), 0u) << "forged line in the log:\n" << log;
    for (char c : line)
      EXPECT_FALSE((c >= 0 && c < 0x20) || c == 0x7f) << "control byte in: " << line;
  }
  EXPECT_GT(n, 0);
}

TEST(LogInjection, PoolSetNameWithNewlineInCreateIsEscapedInRpmemdLog) {
  Target target;
  LocalPool local(kPool);
  unsigned nlanes = 1;
  rpmem_pool_attr attr = sample_attr(4);
  RPMEMpool *rpp =
      rpmem_create("127.0.0.1", kEvilName.c_str(), local.data(), kPool, &nlanes, &attr);
  EXPECT_EQ(rpp, nullptr);
  if (rpp) rpmem_close(rpp);
  const std::string log = target.log_text();
  EXPECT_THAT(log, HasSubstr(kEscaped));
  expect_no_forged_line(log);
}

TEST(LogInjection, PoolSetNameWithNewlineInOpenIsEscapedInRpmemdLog) {
  Target target;
  LocalPool local(kPool);
  unsigned nlanes = 1;
  rpmem_pool_attr attr{};
  RPMEMpool *rpp = rpmem_open("127.0.0.1", kEvilName.c_str(), local.data(), kPool, &nlanes, &attr);
  EXPECT_EQ(rpp, nullptr);
  if (rpp) rpmem_close(rpp);
  const std::string log = target.log_text();
  EXPECT_THAT(log, HasSubstr(kEscaped));
  expect_no_forged_line(log);
}

TEST(LogInjection, PoolSetNameWithNewlineInRemoveIsEscapedInRpmemdLog) {
  Target target;
  EXPECT_EQ(rpmem_remove("127.0.0.1", kEvilName.c_str(), 0), -1);
  const std::string log = target.log_text();
  EXPECT_THAT(log, HasSubstr(kEscaped));
  expect_no_forged_line(log);
}

// The library's own log (a fresh process, so RPMEM_LOG_* apply): the remote
// command line it logs holds the name, escaped.
TEST(LogInjection, PoolSetNameWithNewlineIsEscapedInTheLibraryLog) {
  Target target;
  const std::string log_path = target.dir() + "/librpmem.log";
  set_env("RPMEM_LOG_LEVEL", "4");
  set_env("RPMEM_LOG_FILE", log_path);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl(SECURE_ENV_PROBE_PATH, SECURE_ENV_PROBE_PATH, "127.0.0.1", kEvilName.c_str(), nullptr);
    ::_exit(127);
  }
  ::unsetenv("RPMEM_LOG_LEVEL");
  ::unsetenv("RPMEM_LOG_FILE");
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto bytes = read_file(log_path);
  const std::string log(bytes.begin(), bytes.end());
  EXPECT_THAT(log, HasSubstr("'--remove' '" + kEscaped + "'")) << log;
  expect_no_forged_line(log);
  // rpmemd logged it escaped too.
  EXPECT_THAT(target.log_text(), HasSubstr(kEscaped));
  expect_no_forged_line(target.log_text());
}

}  // namespace
}  // namespace rpmem_test
