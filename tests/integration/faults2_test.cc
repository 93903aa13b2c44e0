// SPDX-License-Identifier: BSD-3-Clause
// More faults: ssh dying while the pool is open, the network cut (a network
// namespace whose link goes down), a full file system at create, SIGINT and
// SIGTERM while lanes stream persists.
#include "tests/integration/netns.h"
#include "tests/integration/raw_peer.h"

#include <gtest/gtest.h>

#include <sys/mount.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "librpmem.h"

namespace rpmem_test {
namespace {

// When RPMEM_TEST_SSH_RELAY names a file, this binary is the "ssh" of a
// test: it writes its pid there, runs tools/local-ssh with its arguments as
// a child and relays stdin/stdout, so that killing it cuts the channel the
// way the death of a real ssh does. glibc passes argc/argv to constructors.
[[gnu::constructor]] void ssh_relay(int argc, char **argv, char **) {
  const char *pid_file = std::getenv("RPMEM_TEST_SSH_RELAY");
  if (!pid_file) return;
  FILE *f = std::fopen(pid_file, "w");
  if (f) {
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  }
  ::unsetenv("RPMEM_TEST_SSH_RELAY");
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC)) ::_exit(255);
  std::vector<char *> args{const_cast<char *>(FAKE_SSH_PATH)};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  pid_t child;
  if (::posix_spawn(&child, FAKE_SSH_PATH, &fa, nullptr, args.data(), environ) != 0) ::_exit(255);
  ::close(in[0]);
  ::close(out[1]);
  int from_client = 0, to_child = in[1];
  char buf[65536];
  for (;;) {
    pollfd p[2] = {{from_client, POLLIN, 0}, {out[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[0].revents && from_client >= 0) {
      ssize_t n = ::read(from_client, buf, sizeof(buf));
      if (n <= 0) {
        ::close(to_child);
        from_client = -1;  // poll ignores negative descriptors
      } else {
        for (ssize_t off = 0; off < n;) {
          ssize_t w = ::write(to_child, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) ::_exit(255);
          off += w;
        }
      }
    }
    if (p[1].revents) {
      ssize_t n = ::read(out[0], buf, sizeof(buf));
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::write(1, buf + off, static_cast<size_t>(n - off));
        if (w <= 0) ::_exit(255);
        off += w;
      }
    }
  }
  int st = 0;
  ::waitpid(child, &st, 0);
  ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 255);
}

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

pid_t read_pid(const std::string &file) {
  auto b = read_file(file);
  return b.empty() ? 0 : static_cast<pid_t>(std::atoi(std::string(b.begin(), b.end()).c_str()));
}

// ---------------------------------------------------------------------------

TEST(SshDeath, SessionEndsCleanlyOnBothSides) {
  Target target;
  target.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  self[n] = 0;
  const std::string ssh_pid_file = target.dir() + "/ssh.pid";
  set_env("RPMEM_SSH", self);
  set_env("RPMEM_TEST_SSH_RELAY", ssh_pid_file);
  set_env("RPMEM_TIMEOUT", "1");
  LocalPool local(kPool, 2);
  unsigned nl = 2;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ::unsetenv("RPMEM_TEST_SSH_RELAY");
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target.log_text();
  ASSERT_EQ(rpmem_persist(rpp, 0, kMiB, 0, 0), 0);
  ASSERT_EQ(rpmem_persist(rpp, kMiB, kMiB, 1, 0), 0);
  pid_t ssh = read_pid(ssh_pid_file), daemon = target.rpmemd_pid();
  ASSERT_GT(ssh, 0);
  ASSERT_GT(daemon, 0);
  ASSERT_NE(ssh, daemon);
  ASSERT_EQ(::kill(ssh, SIGKILL), 0);
  // The daemon side: EOF on the control channel, pool durable, exit.
  EXPECT_TRUE(wait_gone(daemon, std::chrono::seconds(10))) << "rpmemd did not exit";
  EXPECT_NE(target.log_text().find("client disconnected"), std::string::npos) << target.log_text();
  // The client side: the lanes are gone, calls fail within the bound.
  auto start = Clock::now();
  EXPECT_EQ(rpmem_persist(rpp, 0, 4096, 0, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_EQ(rpmem_persist(rpp, 0, 4096, 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_EQ(rpmem_close(rpp), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(zombie_children(), 0);
  // The pool is unlocked and holds what was acknowledged.
  set_env("RPMEM_SSH", FAKE_SSH_PATH);
  rpp = rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(rpp), 0);
  auto r = target.remote_pool(kOnePart, false);
  EXPECT_TRUE(same_bytes(r.data(), local.data(), 0, 2 * kMiB));
}

// ---------------------------------------------------------------------------
// The target in a network namespace behind a veth pair; the link goes down.

class NetCut : public ::testing::Test {
 protected:
  Target target_;
  NetNs net_;
  std::string ns_, host_if_, ns_ip_;

  void SetUp() override {
    std::string why;
    if (!net_.make(why)) GTEST_SKIP() << why;
    ns_ = net_.name();
    host_if_ = net_.host_if();
    ns_ip_ = net_.ns_ip();
    set_env("RPMEM_CMD", net_.in_ns("sh -c '" + target_.rpmemd_cmd() + "'"));
    set_env("FAKE_SSH_CONNECTION", net_.host_ip() + " 50000 " + ns_ip_ + " 22");
  }
  bool links_up() { return net_.links_up(); }
  void TearDown() override {
    if (pid_t pid = target_.rpmemd_pid(); pid > 0) ::kill(pid, SIGKILL);
    ::unsetenv("FAKE_SSH_CONNECTION");
    ::unsetenv("RPMEM_TIMEOUT");
  }
};

TEST_F(NetCut, LinkDownGivesAnErrorWithinTheBoundAndReopenWorksAfter) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  set_env("RPMEM_TIMEOUT", "1");
  LocalPool local(kPool, 6);
  unsigned nl = 2;
  RPMEMpool *rpp = rpmem_create(ns_ip_.c_str(), "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  ASSERT_EQ(rpmem_persist(rpp, 0, kMiB, 0, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_persist(rpp, kMiB, kMiB, 1, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(sh("ip link set " + host_if_ + " down"), 0);
  auto start = Clock::now();
  EXPECT_EQ(rpmem_persist(rpp, 2 * kMiB, kMiB, 0, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  auto took = Clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5));
  start = Clock::now();
  EXPECT_EQ(rpmem_persist(rpp, 0, 64, 1, 0), -1);  // sticky: at once
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(200));
  start = Clock::now();
  rpmem_close(rpp);  // the control channel is not on the link: close completes
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));
  pid_t daemon = target_.rpmemd_pid();
  EXPECT_TRUE(wait_gone(daemon, std::chrono::seconds(15))) << "rpmemd did not exit";
  // The peer back: a new open works and finds every acknowledged byte.
  ASSERT_EQ(sh("ip link set " + host_if_ + " up"), 0);
  ASSERT_TRUE(links_up());
  ::unsetenv("RPMEM_TIMEOUT");
  rpp = rpmem_open(ns_ip_.c_str(), "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  std::vector<uint8_t> back(2 * kMiB);
  ASSERT_EQ(rpmem_read(rpp, back.data(), 0, back.size(), 1), 0) << rpmem_errormsg();
  EXPECT_TRUE(same_bytes(back.data(), local.data(), 0, back.size()));
  EXPECT_EQ(rpmem_close(rpp), 0);
}

// ---------------------------------------------------------------------------
// A small tmpfs as the target file system.

class FullFs : public ::testing::Test {
 protected:
  Target target_;
  std::string mnt_;
  bool mounted_ = false;
  void SetUp() override {
    mnt_ = target_.dir() + "/small";
    std::filesystem::create_directory(mnt_);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=3m") != 0)
      GTEST_SKIP() << "cannot mount a tmpfs: " << strerror(errno);
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
  }
};

TEST_F(FullFs, CreateFailsClearlyAndLeavesNoHalfMadePool) {
  struct Case {
    const char *what;
    std::vector<Part> parts;
    const char *options;
    bool attr;
  };
  std::vector<Case> cases{
      {"one part larger than the fs", {{4 * kMiB, "small/a.part0"}}, "OPTION NOHDRS\n", false},
      {"second part does not fit",
       {{2 * kMiB, "small/b.part0"}, {2 * kMiB, "small/b.part1"}},
       "",
       true},
      {"single header, third part",
       {{2 * kMiB, "small/c.part0"}, {2 * kMiB, "small/c.part1"}, {2 * kMiB, "small/c.part2"}},
       "OPTION SINGLEHDR\n",
       true},
  };
  int tried = 0;
  for (auto &c : cases) {
    SCOPED_TRACE(c.what);
    target_.write_poolset("full.set", c.parts, c.options);
    const size_t size = 4 * kMiB;  // what the client asks
    LocalPool local(size);
    unsigned nl = 1;
    rpmem_pool_attr attr = sample_attr(1);
    if (std::string(c.options) == "OPTION SINGLEHDR\n") attr.incompat_features = 1;
    auto start = Clock::now();
    RPMEMpool *rpp =
        rpmem_create("127.0.0.1", "full.set", local.data(), size, &nl, c.attr ? &attr : nullptr);
    EXPECT_EQ(rpp, nullptr);
    if (rpp) rpmem_close(rpp);
    EXPECT_EQ(errno, EREMOTEIO) << rpmem_errormsg();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
    EXPECT_NE(target_.log_text().find("No space left on device"), std::string::npos)
        << target_.log_text();
    for (auto &e : std::filesystem::directory_iterator(mnt_))
      ADD_FAILURE() << "left behind: " << e.path();
    ++tried;
  }
  EXPECT_EQ(tried, 3);
  // The file system is empty again: a pool that fits is created.
  target_.write_poolset("fits.set", {{2 * kMiB, "small/f.part0"}}, "OPTION NOHDRS\n");
  LocalPool local(2 * kMiB, 8);
  unsigned nl = 1;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "fits.set", local.data(), 2 * kMiB, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  ASSERT_EQ(rpmem_persist(rpp, 0, 2 * kMiB, 0, 0), 0);
  EXPECT_EQ(rpmem_close(rpp), 0);
  EXPECT_TRUE(
      same_bytes(read_file(target_.part_path("small/f.part0")).data(), local.data(), 0, 2 * kMiB));
}

// ---------------------------------------------------------------------------
// SIGINT and SIGTERM while every lane streams persists.

class Signals : public ::testing::TestWithParam<int> {};

TEST_P(Signals, StopTheDaemonCleanlyKeepingEveryAcknowledgedByte) {
  Target target;
  target.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  LocalPool local(kPool);
  unsigned nl = 4;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  ASSERT_EQ(nl, 4u);
  std::vector<std::atomic<uint64_t>> acked(nl);
  std::vector<int> errs(nl, 0);
  std::vector<std::thread> threads;
  for (unsigned lane = 0; lane < nl; ++lane) {
    threads.emplace_back([&, lane] {
      uint8_t *slot = local.data() + lane * kMiB;
      for (uint64_t v = 1;; ++v) {
        std::memcpy(slot, &v, 8);
        if (rpmem_persist(rpp, lane * kMiB, (v % 3 == 0) ? 128 * 1024 : 8, lane, 0)) {
          errs[lane] = errno;
          return;
        }
        acked[lane] = v;
      }
    });
  }
  // The signal comes while every lane streams: after each has had a
  // persist acknowledged (a test beside this one may hold the CPUs for a
  // while), and some more.
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until &&
         std::any_of(acked.begin(), acked.end(), [](const auto &a) { return a.load() == 0; }))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pid_t pid = target.rpmemd_pid();
  ASSERT_EQ(::kill(pid, GetParam()), 0);
  for (auto &t : threads) t.join();
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(10)));
  EXPECT_NE(target.log_text().find("signal received"), std::string::npos) << target.log_text();
  for (unsigned lane = 0; lane < nl; ++lane) {
    EXPECT_EQ(errs[lane], ECONNRESET) << lane;
    EXPECT_GT(acked[lane].load(), 0u) << lane;
  }
  rpmem_close(rpp);
  auto r = target.remote_pool(kOnePart, false);
  for (unsigned lane = 0; lane < nl; ++lane) {
    uint64_t v;
    std::memcpy(&v, r.data() + lane * kMiB, 8);
    EXPECT_GE(v, acked[lane].load()) << "lane " << lane << " lost an acknowledged value";
  }
  unsigned one = 1;
  RPMEMpool *again = rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &one, nullptr);
  ASSERT_NE(again, nullptr) << "still locked: " << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(again), 0);
  EXPECT_EQ(zombie_children(), 0);
}

INSTANTIATE_TEST_SUITE_P(Faults2, Signals, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto &param_info) {
                           return param_info.param == SIGINT ? "Sigint" : "Sigterm";
                         });

}  // namespace
}  // namespace rpmem_test
