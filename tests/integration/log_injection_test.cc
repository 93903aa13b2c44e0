// SPDX-License-Identifier: BSD-3-Clause
// Names from the network land in rpmemd's log escaped: a pool set name with
// a newline (in a create or open request, or on the --remove command line)
// cannot forge a log line, nor carry a terminal escape sequence.
#include "tests/integration/harness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rpmem_test
