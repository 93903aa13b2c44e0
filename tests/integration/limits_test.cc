// SPDX-License-Identifier: BSD-3-Clause
// Limits: very large lane requests, a file descriptor limit too low for the
// lanes (on either side), pools at the minimum sizes, pool_size above the
// remote pool.
#include "tests/integration/raw_peer.h"
#include "tests/sanitizers.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <climits>
#include <filesystem>

#include "librpmem.h"

namespace rpmem_test {
namespace {

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] auto &e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

class Limits : public ::testing::Test {
 protected:
  Target target_;
};

TEST_F(Limits, HugeLaneRequestIsCappedByTheDaemonsDescriptorBudget) {
  target_.write_poolset("p.set", {{4 * kMiB, "p.part0"}}, "OPTION NOHDRS\n");
  // 80 descriptors: rpmemd keeps 64 for itself, so 16 tcp lanes (one
  // descriptor each) or 8 verbs lanes (two each).
  const unsigned cap = verbs_only() ? 8 : 16;
  set_env("RPMEM_CMD", "prlimit --nofile=80:80 sh -c '" + target_.rpmemd_cmd() + "'");
  LocalPool local(4 * kMiB, 3);
  for (unsigned asked : {UINT_MAX, 1u << 20, 17u}) {
    SCOPED_TRACE(asked);
    unsigned nl = asked;
    RPMEMpool *rpp = asked == UINT_MAX
                         ? rpmem_create("127.0.0.1", "p.set", local.data(), 4 * kMiB, &nl, nullptr)
                         : rpmem_open("127.0.0.1", "p.set", local.data(), 4 * kMiB, &nl, nullptr);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
    EXPECT_EQ(nl, cap);
    for (unsigned lane = 0; lane < nl; ++lane)
      ASSERT_EQ(rpmem_persist(rpp, lane * 4096, 4096, lane, 0), 0) << lane << rpmem_errormsg();
    EXPECT_EQ(rpmem_persist(rpp, 0, 8, nl, 0), -1);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(rpmem_close(rpp), 0);
  }
  auto r = target_.remote_pool({{4 * kMiB, "p.part0"}}, false);
  EXPECT_TRUE(same_bytes(r.data(), local.data(), 0, cap * 4096));
}

TEST_F(Limits, DaemonWithoutDescriptorsForLanesGivesAClearErrorAndNoPool) {
  target_.write_poolset("p.set", {{4 * kMiB, "p.part0"}}, "OPTION NOHDRS\n");
  set_env("RPMEM_CMD", "prlimit --nofile=40:40 sh -c '" + target_.rpmemd_cmd() + "'");
  LocalPool local(4 * kMiB);
  unsigned nl = 4;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), 4 * kMiB, &nl, nullptr);
  ASSERT_EQ(rpp, nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(rpmem_errormsg(), "Invalid number of lanes");
  EXPECT_NE(target_.log_text().find("no file descriptors left for lanes"), std::string::npos)
      << target_.log_text();
  EXPECT_FALSE(file_exists(target_.part_path("p.part0"))) << "a half-made pool was left";
}

TEST_F(Limits, ClientWithoutDescriptorsForLanesGivesAClearErrorAndNoPool) {
#ifdef RPMEM_TEST_ASAN
  // UBSan's vptr check probes memory through a pipe, which a process without
  // free descriptors cannot make: it would report every virtual call.
  GTEST_SKIP() << "descriptor exhaustion breaks the sanitizer runtime itself";
#endif
  target_.write_poolset("p.set", {{4 * kMiB, "p.part0"}}, "OPTION NOHDRS\n");
  // rpmemd would inherit the low limit: it gets its own back.
  set_env("RPMEM_CMD", "ulimit -S -n 4096; " + target_.rpmemd_cmd());
  LocalPool local(4 * kMiB);
  auto [child, from_child] = fork_piped([&](int to_parent) {
    // Room for the ssh channel and a few lanes, not for 64.
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = static_cast<rlim_t>(open_fds() + 12);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    unsigned nl = 64;
    RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), 4 * kMiB, &nl, nullptr);
    int err = rpp ? 0 : errno;
    std::string msg = std::to_string(err) + " " + rpmem_errormsg();
    if (rpp) rpmem_close(rpp);
    [[maybe_unused]] auto n = ::write(to_parent, msg.data(), msg.size());
    return 0;
  });
  ASSERT_GE(child, 0);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = ::read(from_child, buf, sizeof(buf))) > 0;) msg.append(buf, n);
  ::close(from_child);
  auto st = wait_child(child, std::chrono::seconds(60));
  ASSERT_TRUE(st && WIFEXITED(*st)) << describe_status(st);
  EXPECT_EQ(msg.substr(0, msg.find(' ')), std::to_string(EMFILE)) << msg;
  EXPECT_NE(msg.find("Too many open files"), std::string::npos) << msg;
  // The daemon removed what it created for the failed pool.
  auto end = Clock::now() + std::chrono::seconds(10);
  while (file_exists(target_.part_path("p.part0")) && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(file_exists(target_.part_path("p.part0"))) << target_.log_text();
}

TEST_F(Limits, MinimumSizesWork) {
  // The smallest part (2 MiB) holding the smallest pool (8 KiB), with and
  // without headers.
  for (bool headers : {false, true}) {
    SCOPED_TRACE(headers ? "headers" : "no headers");
    std::vector<Part> parts{{2 * kMiB, headers ? "h.part0" : "n.part0"}};
    std::string name = headers ? "h.set" : "n.set";
    target_.write_poolset(name, parts, headers ? "" : "OPTION NOHDRS\n");
    LocalPool local(8 * 1024, 5);
    unsigned nl = 2;
    rpmem_pool_attr attr = sample_attr(3);
    RPMEMpool *rpp = rpmem_create("127.0.0.1", name.c_str(), local.data(), 8 * 1024, &nl,
                                  headers ? &attr : nullptr);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
    size_t from = headers ? 4096 : 0;
    ASSERT_EQ(rpmem_persist(rpp, from, 8 * 1024 - from, 0, 0), 0) << rpmem_errormsg();
    ASSERT_EQ(rpmem_deep_persist(rpp, 8 * 1024 - 8, 8, 1), 0) << rpmem_errormsg();
    EXPECT_EQ(rpmem_persist(rpp, 8 * 1024 - 8, 16, 0, 0), -1);
    EXPECT_EQ(errno, EINVAL);
    uint8_t back[8 * 1024];
    ASSERT_EQ(rpmem_read(rpp, back + from, from, 8 * 1024 - from, 1), 0);
    EXPECT_TRUE(same_bytes(back, local.data(), from, 8 * 1024 - from));
    EXPECT_EQ(rpmem_close(rpp), 0);
    auto r = read_file(target_.part_path(parts[0].file));
    ASSERT_EQ(r.size(), 2 * kMiB);
    EXPECT_TRUE(same_bytes(r.data(), local.data(), from, 8 * 1024 - from));
  }
  LocalPool small(8 * 1024);
  unsigned nl = 1;
  // A part below 2 MiB: refused by the daemon, nothing created.
  target_.write_poolset("tiny.set", {{2 * kMiB - 4096, "tiny.part0"}}, "OPTION NOHDRS\n");
  EXPECT_EQ(rpmem_create("127.0.0.1", "tiny.set", small.data(), 8 * 1024, &nl, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(file_exists(target_.part_path("tiny.part0")));
  // pool_size one page larger than the remote pool: EFBIG, nothing left.
  target_.write_poolset("big.set", {{2 * kMiB, "big.part0"}}, "OPTION NOHDRS\n");
  LocalPool big(2 * kMiB + 4096);
  EXPECT_EQ(rpmem_create("127.0.0.1", "big.set", big.data(), big.size(), &nl, nullptr), nullptr);
  EXPECT_EQ(errno, EFBIG);
  EXPECT_FALSE(file_exists(target_.part_path("big.part0")));
}

}  // namespace
}  // namespace rpmem_test
