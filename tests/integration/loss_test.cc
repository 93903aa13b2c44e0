// SPDX-License-Identifier: BSD-3-Clause
// The target lost, end to end against real daemons: rpmemd killed mid-stream
// (the ssh session ends: every lane fails at once), stopped (its lanes get
// no answer: the calls fail at the bound), the network cut past the bound (a
// network namespace whose link goes down), ssh itself dying. Each stalled
// call returns within the bound naming the cause, later calls and the close
// at once, and every byte acknowledged as persistent is in the part file
// (a new open finds it). The rules themselves (sticky loss, the messages,
// stalled calls returning) are unit-tested over fakes in
// tests/unit/librpmem/pool_test.cc.
#include "tests/integration/harness.h"
#include "tests/integration/net_cut.h"
#include "tests/integration/netns.h"
#include "tests/integration/raw_peer.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

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

using Clock = std::chrono::steady_clock;
constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

pid_t read_pid(const std::string &file) {
  auto b = read_file(file);
  return b.empty() ? 0 : static_cast<pid_t>(std::atoi(std::string(b.begin(), b.end()).c_str()));
}

class Loss : public OnePartPool {};

// Each lane writes a counter into its own 8-byte slots, one persist per
// value; the last acknowledged value of every slot is recorded.
struct Writer {
  std::atomic<uint64_t> acked{0};
  std::atomic<int> err{0};
  Clock::time_point failed_at{};
};

TEST_F(Loss, DaemonKilledMidStreamFailsEveryLaneAndKeepsAcknowledgedBytes) {
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(nlanes_, 4u);
  set_env("RPMEM_TIMEOUT", "2");
  std::vector<Writer> writers(nlanes_);
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  for (unsigned lane = 0; lane < nlanes_; ++lane) {
    threads.emplace_back([&, lane] {
      uint8_t *slot = local_.data() + lane * kMiB;
      for (uint64_t v = 1; !stop.load(); ++v) {
        std::memcpy(slot, &v, 8);
        // A larger range behind the slot keeps the pipe busy.
        size_t len = (v % 4 == 0) ? 256 * 1024 : 8;
        int rc = rpmem_persist(rpp, lane * kMiB, len, lane, 0);
        if (rc) {
          writers[lane].err = errno;
          writers[lane].failed_at = Clock::now();
          // Every later call fails fast with the same errno.
          if (rpmem_persist(rpp, lane * kMiB, 8, lane, 0) == 0) writers[lane].err = -1;
          return;
        }
        writers[lane].acked = v;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pid_t pid = target_.rpmemd_pid();
  ASSERT_GT(pid, 0);
  auto killed_at = Clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (auto &t : threads) t.join();
  stop = true;
  for (unsigned lane = 0; lane < nlanes_; ++lane) {
    EXPECT_EQ(writers[lane].err.load(), ECONNRESET) << "lane " << lane;
    EXPECT_LT(writers[lane].failed_at - killed_at, std::chrono::seconds(10)) << "lane " << lane;
    EXPECT_GT(writers[lane].acked.load(), 0u) << "lane " << lane << " never persisted";
  }
  EXPECT_EQ(rpmem_drain(rpp, 0, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  uint8_t buf[8];
  EXPECT_EQ(rpmem_read(rpp, buf, 0, 8, 1), -1);
  EXPECT_EQ(errno, ECONNRESET);
  auto close_start = Clock::now();
  EXPECT_EQ(rpmem_close(rpp), -1) << "the daemon is gone; close reports it but frees";
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_LT(Clock::now() - close_start, std::chrono::seconds(10));
  // What was acknowledged is in the file: each slot holds at least that value.
  auto r = target_.remote_pool(kOnePart, false);
  for (unsigned lane = 0; lane < nlanes_; ++lane) {
    uint64_t v;
    std::memcpy(&v, r.data() + lane * kMiB, 8);
    EXPECT_GE(v, writers[lane].acked.load()) << "lane " << lane << " lost an acknowledged value";
  }
  EXPECT_EQ(zombie_children(), 0);
}

TEST_F(Loss, StoppedDaemonGivesAnErrorWithinTheTimeout) {
  set_env("RPMEM_TIMEOUT", "1");
  RPMEMpool *rpp = create();
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_persist(rpp, 0, 4096, 0, 0), 0);
  pid_t pid = target_.rpmemd_pid();
  ASSERT_TRUE(stop_process(pid, std::chrono::seconds(5)));
  auto start = Clock::now();
  EXPECT_EQ(rpmem_persist(rpp, 4096, 4096, 0, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(5));
  // Sticky: other lanes fail at once.
  start = Clock::now();
  EXPECT_EQ(rpmem_persist(rpp, 8192, 64, 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(100));
  ::kill(pid, SIGKILL);
  ::kill(pid, SIGCONT);
  EXPECT_EQ(rpmem_close(rpp), -1);
  EXPECT_TRUE(wait_gone(pid, std::chrono::seconds(5)));
  // With the peer gone, a new open works and finds the acknowledged bytes.
  ::unsetenv("RPMEM_TIMEOUT");
  RPMEMpool *again = rpmem_open("127.0.0.1", "p.set", local_.data(), kPool, &nlanes_, nullptr);
  ASSERT_NE(again, nullptr) << rpmem_errormsg();
  std::vector<uint8_t> buf(4096);
  ASSERT_EQ(rpmem_read(again, buf.data(), 0, 4096, 0), 0);
  EXPECT_TRUE(same_bytes(buf.data(), local_.data(), 0, 4096));
  EXPECT_EQ(rpmem_close(again), 0);
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

// (NetCut: net_cut.h.)

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

}  // namespace
}  // namespace rpmem_test
