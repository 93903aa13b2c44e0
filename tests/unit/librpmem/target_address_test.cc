// SPDX-License-Identifier: BSD-3-Clause
// Tests of target string parsing ("[user@]host[:port]") and of the ssh port
// check, after PMDK's rpmem_addr test and rpmem_obc_check_port.
#include "librpmem/target_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace rpmem {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct ParseCase {
  const char *target;
  const char *user;
  const char *host;
  const char *port;
  const char *destination;
};

TEST(TargetAddressParse, SplitsUserHostAndPortAsPmdk) {
  const ParseCase cases[] = {
      {"localhost", "", "localhost", "", "localhost"},
      {"user@localhost", "user", "localhost", "", "user@localhost"},
      {"localhost:1234", "", "localhost", "1234", "localhost"},
      {"user@localhost:1234", "user", "localhost", "1234", "user@localhost"},
      {"192.168.0.1:22", "", "192.168.0.1", "22", "192.168.0.1"},
      {"[::1]", "", "::1", "", "::1"},
      {"[::1]:1234", "", "::1", "1234", "::1"},
      {"user@[::1]", "user", "::1", "", "user@::1"},
      {"user@[::1]:1234", "user", "::1", "1234", "user@::1"},
      {"::1", "", "::1", "", "::1"},
      {"user@::1", "user", "::1", "", "user@::1"},
      {"fe80::1", "", "fe80::1", "", "fe80::1"},
      {"fe80::1:2:3", "", "fe80::1:2:3", "", "fe80::1:2:3"},
      {"a@b@c", "a", "b@c", "", "a@b@c"},  // the first '@' ends the user
      {"@host", "", "host", "", "host"},
      {"host:", "", "host", "", "host"},  // an empty port, refused by port_number()
  };
  for (const auto &c : cases) {
    auto r = parse_target(c.target);
    ASSERT_TRUE(r.ok()) << c.target << ": " << r.error().message;
    EXPECT_EQ(r->user, c.user) << c.target;
    EXPECT_EQ(r->host, c.host) << c.target;
    EXPECT_EQ(r->port, c.port) << c.target;
    EXPECT_EQ(r->ssh_destination(), c.destination) << c.target;
  }
}

TEST(TargetAddressParse, RejectsMissingClosingBracketWithEinval) {
  for (const char *t : {"[::1", "user@[::1", "[::1:22", "["}) {
    auto r = parse_target(t);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.error().code, std::error_code(EINVAL, std::generic_category())) << t;
    EXPECT_THAT(r.error().message, HasSubstr(t));
  }
}

TEST(TargetAddressParse, RejectsEmptyHostWithEinval) {
  for (const char *t : {"", "user@", "@", "[]", "[]:22", ":22", "user@:22"}) {
    auto r = parse_target(t);
    ASSERT_FALSE(r.ok()) << "'" << t << "'";
    EXPECT_EQ(r.error().code, std::error_code(EINVAL, std::generic_category())) << t;
  }
}

TEST(TargetAddressParse, RejectsGarbageAfterBracket) {
  auto r = parse_target("[::1]x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, std::error_code(EINVAL, std::generic_category()));
}

// ssh would take a user or host beginning with '-' for an option (PMDK ran
// "-oProxyCommand=..." this way); whitespace and control characters are in
// no host or user name.
TEST(TargetAddressParse, RejectsOptionLikeUserOrHostWithEinvalNamingIt) {
  struct Case {
    std::string target, message;
  };
  const Case cases[] = {
      {"-oProxyCommand=touch /tmp/x", "host '-oProxyCommand=touch /tmp/x' begins with '-'"},
      {"-Fcfg", "host '-Fcfg' begins with '-'"},
      {"-Elog:22", "host '-Elog' begins with '-'"},
      {"-lroot@host", "user '-lroot' begins with '-'"},
      {"-x@host", "user '-x' begins with '-'"},
      {"user@-x", "host '-x' begins with '-'"},
      {"[-x]:22", "host '-x' begins with '-'"},
      {"rpmems://-x@host", "user '-x' begins with '-'"},
      {"rpmems://-host", "host '-host' begins with '-'"},
      {"ho st", "host 'ho st' holds whitespace"},
      {"u v@host", "user 'u v' holds whitespace"},
      {"host\t", "host 'host\\t' holds whitespace"},
      {"host\n-x", "host 'host\\n-x' holds whitespace"},
      {"a\rb@host", "user 'a\\rb' holds whitespace"},
      {std::string("ho\0st", 5), "host 'ho\\x00st' holds a control character"},
      {"host\x01", "host 'host\\x01' holds a control character"},
      {"host\x7f", "host 'host\\x7f' holds a control character"},
  };
  for (const auto &c : cases) {
    auto r = parse_target(c.target);
    ASSERT_FALSE(r.ok()) << c.target;
    EXPECT_EQ(r.error().code, std::error_code(EINVAL, std::generic_category())) << c.target;
    EXPECT_THAT(r.error().message, HasSubstr(c.message)) << c.target;
    EXPECT_THAT(r.error().message, StartsWith("invalid target '")) << c.target;
    for (char ch : r.error().message) EXPECT_FALSE(ch >= 0 && ch < 0x20) << r.error().message;
  }
}

TEST(TargetAddressParse, AcceptsDashesAndDotsInsideNames) {
  auto r = parse_target("my-user@my-host.example-1.com:22");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->user, "my-user");
  EXPECT_EQ(r->host, "my-host.example-1.com");
  EXPECT_TRUE(parse_target("user@[fe80::1%eth0]").ok());
}

TEST(TargetAddressSplit, KeepsWhatParseRefuses) {
  auto r = split_target("-x@-y");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->user, "-x");
  EXPECT_EQ(r->host, "-y");
}

void expect_port_error(const std::string &port, const std::string &message) {
  auto r = port_number(port);
  ASSERT_FALSE(r.ok()) << "'" << port << "' accepted as " << r.value();
  EXPECT_EQ(r.error().code, std::error_code(EINVAL, std::generic_category())) << port;
  // PMDK may add " -- '<port>'" to the last two messages.
  EXPECT_THAT(r.error().message, StartsWith(message)) << port;
}

TEST(TargetAddressPort, AcceptsOneTo65535) {
  EXPECT_EQ(port_number("1").value(), 1);
  EXPECT_EQ(port_number("22").value(), 22);
  EXPECT_EQ(port_number("1234").value(), 1234);
  EXPECT_EQ(port_number("65535").value(), 65535);
}

TEST(TargetAddressPort, RejectsNonNumberWithPmdkMessage) {
  expect_port_error("x", "invalid port number -- 'x'");
  expect_port_error("12x", "invalid port number -- '12x'");
  expect_port_error("", "invalid port number -- ''");
  expect_port_error("1-2", "invalid port number -- '1-2'");
  expect_port_error("0x16", "invalid port number -- '0x16'");
}

TEST(TargetAddressPort, RejectsZeroAndNegativeWithPmdkMessage) {
  expect_port_error("0", "port number must be positive");
  expect_port_error("-1", "port number must be positive");
  expect_port_error("-65536", "port number must be positive");
}

TEST(TargetAddressPort, RejectsAbove65535WithPmdkMessage) {
  expect_port_error("65536", "port number too large");
  expect_port_error("99999", "port number too large");
  expect_port_error("4294967296", "port number too large");
}

// PMDK parsed the port with strtol: leading zeros are fine ("000022" is
// 22), and so is ssh (-p 000022). Ours calls any port longer than five
// characters "too large" (librpmem/target_address.cc:49).
TEST(TargetAddressPort, AcceptsLeadingZerosAsPmdkStrtol) {
  auto r = port_number("000022");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), 22);
}

TEST(TargetAddressPort, ParsedTargetPortFeedsPortNumber) {
  auto t = parse_target("user@[::1]:1234");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(port_number(t->port).value(), 1234);
}

}  // namespace
}  // namespace rpmem
