// SPDX-License-Identifier: BSD-3-Clause
// The words a drop-in must keep: rpmemd's --log-file in PMDK's layout
// (golden sessions), and rpmem_errormsg() giving PMDK's text for each
// situation PMDK had one for, with our detail in the library's log.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The daemon's lines without those of the data lanes, which the transport
// logs from its own threads (their place among the others is not fixed).
std::vector<std::string> session_lines(const std::string &log) {
  static const std::regex lane_line(R"(^(lane \d+|\d+ lanes served by ).*)");
  std::vector<std::string> out;
  for (auto &l : lines_of(log))
    if (!std::regex_match(l, lane_line)) out.push_back(l);
  return out;
}

// `expected` lines are literal except "{}", which stands for any text.
::testing::AssertionResult matches(const std::vector<std::string> &actual,
                                   const std::vector<std::string> &expected) {
  std::string all;
  for (auto &l : actual) all += "  |" + l + "\n";
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string re;
    const std::string &e = expected[i];
    for (size_t p = 0; p < e.size(); ++p) {
      if (e.compare(p, 2, "{}") == 0) {
        re += ".*";
        ++p;
      } else if (std::string("\\^$.|?*+()[]{}").find(e[p]) != std::string::npos) {
        re += '\\';
        re += e[p];
      } else {
        re += e[p];
      }
    }
    if (i >= actual.size())
      return ::testing::AssertionFailure()
             << "line " << i + 1 << " missing, expected '" << e << "'; the log:\n"
             << all;
    if (!std::regex_match(actual[i], std::regex(re)))
      return ::testing::AssertionFailure()
             << "line " << i + 1 << " is '" << actual[i] << "', expected '" << e << "'; the log:\n"
             << all;
  }
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << actual.size() << " lines, expected " << expected.size() << "; the log:\n"
           << all;
  return ::testing::AssertionSuccess();
}

class Words : public ::testing::Test {
 protected:
  Words() {
    // Deterministic: tcp only, a known user.
    set_env("RPMEM_ENABLE_VERBS", "0");
    if (const char *u = std::getenv("USER")) user_ = u;
    set_env("USER", "rpmem-tester");
  }
  void SetUp() override {
    if (verbs_only()) GTEST_SKIP() << "the expected lines are those of a tcp session on loopback";
  }
  ~Words() override {
    ::unsetenv("RPMEM_ENABLE_VERBS");
    if (user_.empty())
      ::unsetenv("USER");
    else
      set_env("USER", user_);
  }

  std::vector<std::string> preamble() const {
    return {
        "rpmemd version {}",
        "ssh connection: 127.0.0.1 50000 127.0.0.1 22",
        "user: rpmem-tester",
        "configuration",
        "    pool set directory: '" + target_.poolset_dir() + "'",
        "    persist method: General Purpose Server Persistency Method",
        "    number of threads: 0",
    };
  }

  std::string user_;
  Target target_;
  LocalPool local_{kPool};
  unsigned nlanes_ = 2;
};

TEST_F(Words, CreateOpenCloseSessionLogsAsPmdk) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(0x10);  // PMEMOBJ 6, UUIDs 0x10.., 0x20.., 0x30.., 0x40..
  attr.compat_features = 0x1;
  attr.incompat_features = 0x2;
  attr.ro_compat_features = 0x4;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, &nlanes_, &attr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  ASSERT_EQ(rpmem_persist(rpp, 4096, 4096, 0, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  rpmem_pool_attr got{};
  rpp = rpmem_open("127.0.0.1", "p.set", local_.data(), kPool, &nlanes_, &got);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();

  // A UUID prints as PMDK's util_uuid_to_string did: the first three
  // fields as host-order integers (little-endian here).
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "expected lines are little-endian");
  const std::vector<std::string> attrs = {
      "    signature: 'PMEMOBJ'",
      "    major: 6",
      "    compat_features: 0x1",
      "    incompat_features: 0x2",
      "    ro_compat_features: 0x4",
      "    poolset_uuid: 13121110-1514-1716-1819-1a1b1c1d1e1f",
      "    uuid: 23222120-2524-2726-2829-2a2b2c2d2e2f",
      "    next_uuid: 33323130-3534-3736-3839-3a3b3c3d3e3f",
      "    prev_uuid: 43424140-4544-4746-4849-4a4b4c4d4e4f",
  };
  auto request = [&](const char *what) {
    return std::vector<std::string>{
        std::string(what) + " request:",
        "    pool descriptor: 'p.set'",
        "    pool size: " + std::to_string(kPool),
        "    nlanes: 2",
        "    provider: tcp",
        "    buff_size: 32768",
    };
  };
  const std::vector<std::string> policy_and_response_tail = {
      "persistency policy:",
      "    persist method: General Purpose Server Persistency Method",
      test_medium() == "pmem" ? "    persist flush: pmem_persist" : "    persist flush: pmem_msync",
      "    medium: {}",
      "    durability: {}",
  };
  // The ctest label tls-lanes runs every test with RPMEM_DATA_TLS=1: one
  // line more then, and it says the lanes are in TLS.
  const char *data_tls = std::getenv("RPMEM_DATA_TLS");
  const bool tls = data_tls && std::string(data_tls) == "1";
  auto response = [&](const char *what) {
    std::vector<std::string> lines{
        std::string(what) + " request response: (status = 0)",
        "    port: {}",
        "    provider: tcp",
        "    pool size: " + std::to_string(kPool),
        "    nlanes: 2",
        "    persist method: General Purpose Server Persistency Method",
    };
    const char *data_seal = std::getenv("RPMEM_DATA_SEAL");
    if (tls && !(data_seal && std::string(data_seal) == "0"))
      lines.push_back("    data lanes: sealed, AES-128-GCM (a key of the session, over ssh)");
    else if (tls)
      lines.push_back("    data lanes: TLS (a pre-shared key of the session)");
    lines.push_back("waiting for in-band connection");
    lines.push_back("in-band connection established");
    return lines;
  };
  const std::vector<std::string> close = {
      "close request",
      "closing pool",
      "pool closed",
      "close request response (status = 0)",
  };
  std::vector<std::string> expected;
  auto add = [&](const std::vector<std::string> &v) {
    expected.insert(expected.end(), v.begin(), v.end());
  };
  add(preamble());
  add(request("create"));
  add({"pool attributes:"});
  add(attrs);
  add(policy_and_response_tail);
  add(response("create"));
  add(close);
  add(preamble());
  add(request("open"));
  add({"pool attributes:"});
  add(attrs);
  add(policy_and_response_tail);
  add(response("open"));
  add(close);
  EXPECT_TRUE(matches(session_lines(target_.log_text()), expected));
  // Every line is bare: no "rpmemd[pid]: <level>" prefix in the file.
  EXPECT_EQ(target_.log_text().find("rpmemd["), std::string::npos);
}

TEST_F(Words, FailedCreateLogsAsPmdk) {
  unsigned nl = 2;
  EXPECT_EQ(rpmem_create("127.0.0.1", "none.set", local_.data(), kPool, &nl, nullptr), nullptr);
  EXPECT_EQ(errno, ENOENT);
  std::vector<std::string> expected = preamble();
  const std::vector<std::string> rest = {
      "create request:",
      "    pool descriptor: 'none.set'",
      "    pool size: " + std::to_string(kPool),
      "    nlanes: 2",
      "    provider: tcp",
      "    buff_size: 32768",
      "pool attributes:",
      "    NULL",
      "cannot create pool set -- '" + target_.poolset_dir() +
          "/none.set': No such file or directory",
  };
  expected.insert(expected.end(), rest.begin(), rest.end());
  EXPECT_TRUE(matches(session_lines(target_.log_text()), expected));
}

// PMDK's obj_rpmem_basic_integration/TEST20: libpmemobj creates a pool
// whose remote pool set has a part below the 2 MiB minimum. The daemon's
// log at the tests' level (info) is PMDK's, line for line: no "buff_size"
// missing, no detail of the pool set's fault (that is at debug level) and
// no response block for a refused request.
TEST_F(Words, CreateRefusedForATooSmallPartLogsAsPmdksTest20) {
  std::vector<Part> parts;
  for (int i = 0; i < 9; ++i) parts.push_back({2 * kMiB, "testfile_remote" + std::to_string(i)});
  parts.push_back({2044 * 1024, "testfile_remote9"});
  target_.write_poolset("testset_remote", parts);
  rpmem_pool_attr attr{};
  std::memcpy(attr.signature, "PMEMOBJ", 8);
  attr.major = 6;
  for (int i = 0; i < 16; ++i) attr.uuid[i] = static_cast<unsigned char>(i + 1);
  LocalPool local(18 * kMiB);
  unsigned nl = 4;
  EXPECT_EQ(rpmem_create("127.0.0.1", "testset_remote", local.data(), local.size(), &nl, &attr),
            nullptr);
  EXPECT_EQ(errno, EINVAL);
  // PMDK's node_0_rpmemd20.log.match, its $(nW) and $(*) as {}.
  std::vector<std::string> expected = preamble();
  const std::vector<std::string> rest = {
      "create request:",
      "    pool descriptor: 'testset_remote'",
      "    pool size: " + std::to_string(local.size()),
      "    nlanes: {}",
      "    provider: {}",
      "    buff_size: {}",
      "pool attributes:",
      "    signature: 'PMEMOBJ'",
      "    major: {}",
      "    compat_features: 0x{}",
      "    incompat_features: 0x{}",
      "    ro_compat_features: 0x{}",
      "    poolset_uuid: {}",
      "    uuid: {}",
      "    next_uuid: {}",
      "    prev_uuid: {}",
      "cannot create pool set -- '{}/testset_remote': Invalid argument",
  };
  expected.insert(expected.end(), rest.begin(), rest.end());
  EXPECT_TRUE(matches(session_lines(target_.log_text()), expected));
}

// Each text PMDK 1.11's rpmem_errormsg() gave, and the situation that
// produces it, through the public API against a real rpmemd.
TEST_F(Words, ErrormsgIsPmdksTextForEachSituation) {
  struct Seen {
    int err;
    std::string msg;
  };
  auto seen = [] { return Seen{errno, rpmem_errormsg()}; };
  auto expect = [&](const std::string &situation, bool failed, int err, const std::string &text) {
    Seen s = seen();
    EXPECT_TRUE(failed) << situation;
    EXPECT_EQ(s.err, err) << situation << ": " << s.msg;
    EXPECT_EQ(s.msg, text) << situation;
  };
  auto create = [&](const char *target, const char *set, void *addr, size_t size, unsigned *nlanes,
                    const rpmem_pool_attr *attr = nullptr) {
    errno = 0;
    RPMEMpool *rpp = rpmem_create(target, set, addr, size, nlanes, attr);
    if (rpp) rpmem_close(rpp);
    return rpp == nullptr;
  };
  auto open = [&](const char *set, size_t size) {
    errno = 0;
    unsigned nl = 2;
    RPMEMpool *rpp = rpmem_open("127.0.0.1", set, local_.data(), size, &nl, nullptr);
    if (rpp) rpmem_close(rpp);
    return rpp == nullptr;
  };
  const char *host = "127.0.0.1";
  uint8_t *addr = local_.data();
  unsigned nl = 2, zero = 0;

  // Arguments.
  expect("NULL pool address", create(host, "p.set", nullptr, kPool, &nl), EINVAL,
         "invalid pool address");
  expect("unaligned pool address", create(host, "p.set", addr + 1, kPool, &nl), EINVAL,
         "Pool address must be aligned to page size (4096)");
  expect("unaligned pool size", create(host, "p.set", addr, kPool - 1, &nl), EINVAL,
         "Pool size must be aligned to page size (4096)");
  expect("zero pool size", create(host, "p.set", addr, 0, &nl), EINVAL, "invalid pool size");
  expect("NULL nlanes", create(host, "p.set", addr, kPool, nullptr), EINVAL,
         "lanes pointer cannot be NULL");
  expect("zero nlanes", create(host, "p.set", addr, kPool, &zero), EINVAL,
         "number of lanes must be positive");
  expect("bad target", create("[::1", "p.set", addr, kPool, &nl), EINVAL,
         "parsing target node address failed: Invalid argument");
  expect("bad ssh port", create("127.0.0.1:x", "p.set", addr, kPool, &nl), EINVAL,
         "out-of-band connection failed: Invalid argument");
  set_env("RPMEM_ENABLE_SOCKETS", "0");
  expect("no provider", create(host, "p.set", addr, kPool, &nl), ENOMEDIUM, "cannot find provider");
  ::unsetenv("RPMEM_ENABLE_SOCKETS");

  // The out-of-band connection.
  const std::string cmd = target_.rpmemd_cmd();
  set_env("RPMEM_CMD", "echo 'rpmemd: not here' >&2; exit 127");
  expect("rpmemd does not start", create(host, "p.set", addr, kPool, &nl), ECONNRESET,
         "out-of-band connection failed: Connection reset by peer");
  std::ofstream(target_.dir() + "/bad.conf") << "no-such-key = 1\n";
  set_env("RPMEM_CMD", RPMEMD_PATH " -c " + target_.dir() + "/bad.conf");
  expect("bad rpmemd config", create(host, "p.set", addr, kPool, &nl), EINVAL,
         "out-of-band connection failed: Invalid argument");
  set_env("RPMEM_CMD",
          "printf '\\001\\000\\000\\000\\014\\000\\000\\000\\002\\000\\000\\000"
          "\\000\\000\\000\\000\\002\\000\\000\\000'");
  expect("newer protocol", create(host, "p.set", addr, kPool, &nl), EPROTONOSUPPORT,
         "Protocol version number mismatch");
  set_env("RPMEM_CMD", cmd);

  // The daemon's status codes.
  expect("missing pool set", create(host, "none.set", addr, kPool, &nl), ENOENT,
         "Pool set or its part doesn't exist or it is unavailable");
  expect("open a missing pool set", open("none.set", kPool), ENOENT,
         "Pool set or its part doesn't exist or it is unavailable");
  const std::string abs = target_.poolset_dir() + "/p.set";
  expect("absolute pool set name", create(host, abs.c_str(), addr, kPool, &nl), EINVAL,
         "Invalid pool descriptor");
  target_.write_poolset("hdr.set", {{kPool, "h.part0"}});
  expect("no attributes for a set with headers", create(host, "hdr.set", addr, kPool, &nl), EINVAL,
         "Invalid pool set configuration");
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  LocalPool big(2 * kPool);
  expect("remote pool too small", create(host, "p.set", big.data(), 2 * kPool, &nl), EFBIG,
         "Invalid pool size");
  rpmem_pool_attr attr = sample_attr(3);
  target_.write_poolset("e.set", {{kPool, "e.part0"}});
  ASSERT_TRUE(!create(host, "e.set", addr, kPool, &nl, &attr)) << rpmem_errormsg();
  expect("create over an existing pool", create(host, "e.set", addr, kPool, &nl, &attr), EEXIST,
         "Pool already exists");

  // One session on p.set: a second opener, the data path, set_attr.
  nl = 2;
  RPMEMpool *rpp = rpmem_create(host, "p.set", addr, kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  expect("pool in use", open("p.set", kPool), EBUSY, "Pool already in use");
  expect("persist flags", rpmem_persist(rpp, 4096, 64, 0, 8) == -1, EINVAL, "invalid flags (0x8)");
  expect("deep persist on a bad lane", rpmem_deep_persist(rpp, 4096, 64, 9) == -1, EINVAL,
         "persist operation failed");
  uint8_t buf[64];
  expect("read on a bad lane", rpmem_read(rpp, buf, 4096, 64, 9) == -1, EINVAL,
         "read operation failed: Invalid argument");
  expect("set_attr without headers", rpmem_set_attr(rpp, &attr) == -1, EINVAL,
         "Invalid pool set configuration");
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();

  rpmem_pool_attr got{};
  RPMEMpool *hp = rpmem_open(host, "e.set", addr, kPool, &nl, &got);
  ASSERT_NE(hp, nullptr) << rpmem_errormsg();
  expect("persist into the header", rpmem_persist(hp, 100, 64, 0, 0) == -1, EINVAL,
         "offset (100) in pool is less than 4096 bytes");
  // The daemon dies: the CLOSE exchange fails.
  ASSERT_EQ(::kill(target_.rpmemd_pid(), SIGKILL), 0);
  ASSERT_TRUE(wait_gone(target_.rpmemd_pid(), std::chrono::seconds(10)));
  errno = 0;
  expect("close after the daemon died", rpmem_close(hp) == -1, ECONNRESET,
         "close request failed: Connection reset by peer");

  // rpmem_remove.
  expect("remove flags", rpmem_remove(host, "p.set", 4) == -1, EINVAL, "invalid flags specified");
  errno = 0;
  expect("remove a missing pool", rpmem_remove(host, "nope.set", 0) == -1, ENOENT,
         "remote command failed");
  // Our detail is in the library's log, at the err level.
  EXPECT_NE(library_log().find("rpmemd: removing 'nope.set' failed: No such file or directory"),
            std::string::npos)
      << library_log();

  // rpmem_check_version.
  EXPECT_STREQ(rpmem_check_version(2, 0), "librpmem major version mismatch (need 2, found 1)");
  EXPECT_STREQ(rpmem_check_version(1, 4), "librpmem minor version mismatch (need 4, found 3)");
  EXPECT_EQ(rpmem_check_version(1, 3), nullptr);
}

}  // namespace
}  // namespace rpmem_test
