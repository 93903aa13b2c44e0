// SPDX-License-Identifier: BSD-3-Clause
// Tests of control-character escaping (escape_control) and of the logger's
// use of it: a message argument can never end a log line or start another.
#include "common/log.h"

#include "common/text.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace rpmem {
namespace {

TEST(EscapeControl, WritesNewlineReturnAndTabAsBackslashLetters) {
  EXPECT_EQ(escape_control("a\nb"), "a\\nb");
  EXPECT_EQ(escape_control("a\rb"), "a\\rb");
  EXPECT_EQ(escape_control("a\tb"), "a\\tb");
}

TEST(EscapeControl, WritesOtherControlBytesAsHex) {
  EXPECT_EQ(escape_control(std::string("\0", 1)), "\\x00");
  EXPECT_EQ(escape_control("\x01\x1b[31m\x1f"), "\\x01\\x1b[31m\\x1f");
  EXPECT_EQ(escape_control("\x7f"), "\\x7f");
}

TEST(EscapeControl, KeepsPrintableBackslashAndHighBytes) {
  EXPECT_EQ(escape_control("pool set 'a b/c.set' \\n"), "pool set 'a b/c.set' \\n");
  EXPECT_EQ(escape_control("\xc3\xa9\x80\xff"), "\xc3\xa9\x80\xff");
  EXPECT_EQ(escape_control(""), "");
}

TEST(EscapeControl, LeavesNoControlByteForAnyInput) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (char c : escape_control(all)) EXPECT_FALSE(is_control(c)) << static_cast<int>(c);
}

class LogFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rpmem-log-XXXXXX";
    int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = tmpl;
    ASSERT_TRUE(log::configure(log::Level::kDebug, log::Sink::kFile, path_, "test"));
  }
  void TearDown() override {
    log::configure(log::Level::kNone, log::Sink::kStderr);
    ::unlink(path_.c_str());
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string path_;
};

TEST_F(LogFile, ArgumentWithNewlineStaysOnOneLine) {
  const std::string forged = std::string("x.set\ntest[1]: <err> forged\r\x1b[2K");
  RPMEM_LOG_ERR("pool set '%s' refused", forged.c_str());
  const std::string t = text();
  const std::string want = "pool set 'x.set\\ntest[1]: <err> forged\\r\\x1b[2K' refused\n";
  EXPECT_NE(t.find(want), std::string::npos) << t;
  EXPECT_EQ(t.find('\n'), t.size() - 1) << t;  // one line
  EXPECT_EQ(t.find('\r'), std::string::npos);
  EXPECT_EQ(t.find('\x1b'), std::string::npos);
}

TEST_F(LogFile, FormatTabsAreFourSpacesArgumentTabsAreEscaped) {
  RPMEM_LOG_NOTICE("\tpersist method: %s", "a\tb");
  const std::string t = text();
  EXPECT_NE(t.find("    persist method: a\\tb\n"), std::string::npos) << t;
  EXPECT_EQ(t.find('\t'), std::string::npos) << t;
}

}  // namespace
}  // namespace rpmem
