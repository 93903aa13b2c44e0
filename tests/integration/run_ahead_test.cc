// SPDX-License-Identifier: BSD-3-Clause
// A replica that never stops its application (RPMEM_ON_LOSS=continue), end
// to end against real daemons behind a link the test cuts (net_cut.h): a
// partition past the bound fails no call, reads of the replica behind are
// refused, and once the link is back the pool catches up by itself, sending
// again only what changed (the daemon's log says how much), to a part file
// equal to the pool's memory; a client killed while behind catches up at
// its next open, from its first write, and until then no other client may
// open the replica (ESTALE). The rules over fakes are in
// tests/unit/librpmem/run_ahead_test.cc; the daemon's mark in
// behind_test.cc. Over verbs (RPMEM_TEST_TRANSPORT=verbs, the soft-RoCE VM
// of scripts/test-rdma.sh) the link is a wire of soft-RoCE instead, cut
// the same way (tests/rdma/roce_wire.h): rxe serves only the first network
// namespace.
#include "tests/integration/harness.h"
#include "tests/integration/net_cut.h"
#include "tests/rdma/roce_wire.h"
#include "tests/sanitizers.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <thread>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {
namespace {

using Clock = std::chrono::steady_clock;
using rpmem_test::kUnderTsan;

constexpr size_t kBig = 32 * kMiB;
constexpr size_t kPage = 4096;
// What the application writes while behind: [kAheadAt, kAheadAt + kAhead).
constexpr size_t kAheadAt = 8 * kMiB, kAhead = 8 * kMiB;

bool wait_for(const std::string &path, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (!std::filesystem::exists(path))
    if (Clock::now() > end)
      return false;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return true;
}

void touch(const std::string &path) { close(::open(path.c_str(), O_CREAT | O_WRONLY, 0600)); }

// A pool's record in `dir` (RPMEM_STATE_DIR): whether one is there.
bool has_record(const std::string &dir) {
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".pool") return true;
  return false;
}

bool record_gone(const std::string &dir, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (has_record(dir) && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return !has_record(dir);
}

// The local pool in a file, mapped shared: what a killed process wrote is
// there for the next.
class FilePool {
 public:
  FilePool(const std::string &path, size_t size, bool create) : size_(size) {
    const int fd = ::open(path.c_str(), O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0600);
    if (fd < 0 || (create && ::ftruncate(fd, static_cast<off_t>(size)) != 0)) std::abort();
    addr_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (addr_ == MAP_FAILED) std::abort();
  }
  ~FilePool() { ::munmap(addr_, size_); }
  uint8_t *data() const { return static_cast<uint8_t *>(addr_); }

 private:
  void *addr_;
  size_t size_;
};

// Writes the pages of [kAheadAt, +kAhead) with `byte`, one persist a page on
// `lane`: how many failed.
int write_ahead(RPMEMpool *rpp, uint8_t *pool, uint8_t byte, unsigned lane) {
  int failed = 0;
  for (size_t off = kAheadAt; off < kAheadAt + kAhead; off += kPage) {
    std::memset(pool + off, byte, kPage);
    if (rpmem_persist(rpp, off, kPage, lane, 0) != 0) ++failed;
  }
  return failed;
}

// When RPMEM_TEST_AHEAD_CHILD names a directory, this binary is the client a
// test kills while it runs ahead: it creates the pool over its file
// (DIR/local.pool) on RPMEM_TEST_AHEAD_TARGET, says DIR/ready, waits for
// DIR/cut, writes ahead, says DIR/behind and waits to be killed.
[[gnu::constructor]] void ahead_child() {
  const char *dir = std::getenv("RPMEM_TEST_AHEAD_CHILD");
  if (!dir) return;
  const std::string d = dir;
  ::unsetenv("RPMEM_TEST_AHEAD_CHILD");
  FilePool local(d + "/local.pool", kBig, false);
  unsigned nl = 2;
  RPMEMpool *rpp = rpmem_create(std::getenv("RPMEM_TEST_AHEAD_TARGET"), "p.set", local.data(), kBig,
                                &nl, nullptr);
  if (!rpp || rpmem_persist(rpp, 0, kBig, 0, 0) != 0) ::_exit(2);
  touch(d + "/ready");
  if (!wait_for(d + "/cut", std::chrono::seconds(60))) ::_exit(3);
  if (write_ahead(rpp, local.data(), 0x5c, 0) != 0) ::_exit(4);
  touch(d + "/behind");
  ::sleep(120);
  ::_exit(5);
}

// The bytes the daemon's log says the last catch-up sent (-1: none).
long long resent_bytes(const Target &t) {
  const std::string log = t.log_text();
  static const std::regex kLine(
      R"(reports pool set 'p\.set' in sync \(0 bytes to send again, (\d+) sent\))");
  long long last = -1;
  for (std::sregex_iterator m(log.begin(), log.end(), kLine), end; m != end; ++m)
    last = std::stoll((*m)[1].str());
  return last;
}

class RunAheadCut : public NetCut {
 protected:
  void SetUp() override {
    if (verbs_only()) {
      // rpmemd serves lanes on the wire's target end, the client's reach it
      // across the wire (its control channel, the stand-in ssh's pipes, not).
      ASSERT_TRUE(WirePair::up()) << "no wire pair of soft-RoCE devices (wire-pair.sh up)";
      ns_ip_ = WirePair::kTarget;
      set_env("FAKE_SSH_CONNECTION",
              std::string(WirePair::kClient) + " 50000 " + WirePair::kTarget + " 22");
    } else {
      NetCut::SetUp();
      if (IsSkipped()) return;
    }
    target_.write_poolset("p.set", {{kBig, "p.part0"}}, "OPTION NOHDRS\n");
    state_ = target_.dir() + "/state";
    set_env("RPMEM_TIMEOUT", "1");
    set_env("RPMEM_ON_LOSS", "continue");
    set_env("RPMEM_STATE_DIR", state_);
  }
  void TearDown() override {
    roce_cut_.reset();
    for (const char *v : {"RPMEM_ON_LOSS", "RPMEM_STATE_DIR", "RPMEM_OPEN_BEHIND"}) ::unsetenv(v);
    NetCut::TearDown();
  }
  // The link drops every packet both ways, until heal().
  bool cut() {
    if (!verbs_only()) return net_.cut(true);
    roce_cut_.emplace();
    return roce_cut_->on();
  }
  bool heal() {
    if (!verbs_only()) return net_.heal();
    roce_cut_.reset();
    return true;
  }
  // The part file equals the pool.
  ::testing::AssertionResult replica_is(const uint8_t *pool) const {
    return same_bytes(target_.remote_pool({{kBig, "p.part0"}}, false).data(), pool, 0, kBig);
  }
  std::string state_;
  std::optional<RoceCut> roce_cut_;
};

// A figure's knob: the environment's value of `name`, else `fallback`.
size_t knob(const char *name, size_t fallback) {
  const char *v = std::getenv(name);
  return v && *v ? static_cast<size_t>(std::atoll(v)) : fallback;
}

// The median of `v` (0 when empty).
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The partition lasts RPMEM_TEST_CUT_SECONDS (3 by default) in a pool of
// RPMEM_TEST_POOL_MIB (32), the application rewriting RPMEM_TEST_AHEAD_MIB
// (8) all along; a counter persists on lane 1 every 5 ms throughout. The
// figures (the calls' pace behind, how long the catch-up took and what it
// sent, the counter's median in sync and while catching up) are logged.
TEST_F(RunAheadCut, APartitionPastTheBoundFailsNoCallAndTheReplicaCatchesUpWithWhatChanged) {
  const size_t pool_size = knob("RPMEM_TEST_POOL_MIB", 32) * kMiB;
  const size_t ahead = knob("RPMEM_TEST_AHEAD_MIB", 8) * kMiB;
  const auto cut_for = std::chrono::seconds(knob("RPMEM_TEST_CUT_SECONDS", 3));
  ASSERT_GE(pool_size, kAheadAt + ahead + kPage);
  target_.write_poolset("p.set", {{pool_size, "p.part0"}}, "OPTION NOHDRS\n");
  LocalPool local(pool_size, 6);
  unsigned nl = 2;
  RPMEMpool *rpp = rpmem_create(ns_ip_.c_str(), "p.set", local.data(), pool_size, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  ASSERT_EQ(rpmem_persist(rpp, 0, pool_size, 0, 0), 0) << rpmem_errormsg();
  // Under TSan the counter only persists: its stores race, on purpose, with
  // the catch-up's send of its page (the library reads what the
  // application writes, as any persist of a range being written does).
  const size_t slot = pool_size - kPage;
  std::atomic<bool> stop{false};
  std::atomic<int> counter_failures{0};
  std::vector<std::pair<Clock::time_point, double>> counted;  // (when, microseconds)
  counted.reserve(1 << 16);
  std::thread counter([&] {
    for (uint64_t v = 1; !stop.load(); ++v) {
      if (!kUnderTsan) std::memcpy(local.data() + slot, &v, sizeof(v));
      const auto t0 = Clock::now();
      if (rpmem_persist(rpp, slot, sizeof(v), 1, 0) != 0) ++counter_failures;
      counted.emplace_back(t0,
                           std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the counter in sync
  ASSERT_TRUE(cut());
  const auto cut_at = Clock::now();
  uint64_t behind_calls = 0;
  Clock::duration slowest{};
  // Passes over the range, each with the next byte (which wraps).
  for (unsigned pass = 0; pass == 0 || Clock::now() - cut_at < cut_for; ++pass) {
    const auto byte = static_cast<uint8_t>(0x5c + pass);
    for (size_t off = kAheadAt; off < kAheadAt + ahead; off += kPage) {
      std::memset(local.data() + off, byte, kPage);
      const auto t0 = Clock::now();
      ASSERT_EQ(rpmem_persist(rpp, off, kPage, 0, 0), 0) << rpmem_errormsg();
      if (behind_calls++ > 0) slowest = std::max(slowest, Clock::now() - t0);  // but the first
      if (pass > 0 && Clock::now() - cut_at >= cut_for) break;
    }
    if (pass == 0) {
      EXPECT_LT(Clock::now() - cut_at, std::chrono::seconds(10)) << "the writes waited";
      EXPECT_TRUE(has_record(state_)) << "behind without a record";
      uint8_t buf[16];
      EXPECT_EQ(rpmem_read(rpp, buf, 0, sizeof(buf), 0), -1);
      EXPECT_EQ(errno, ESTALE);
    }
  }
  ASSERT_TRUE(heal());
  const auto healed = Clock::now();
  // The record is saved again when the pool reattaches (its new token),
  // and goes once it is in sync: the catch-up is between.
  Clock::time_point reattached = healed;
  std::filesystem::file_time_type seen{};
  for (auto end = healed + std::chrono::seconds(30); has_record(state_) && Clock::now() < end;) {
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator(state_, ec))
      if (e.path().extension() == ".pool") {
        const auto t = std::filesystem::last_write_time(e.path(), ec);
        if (!ec && t != seen) {
          if (seen != std::filesystem::file_time_type{}) reattached = Clock::now();
          seen = t;
        }
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(has_record(state_)) << target_.log_text();
  const auto caught_up = Clock::now();
  stop = true;
  counter.join();
  EXPECT_EQ(counter_failures.load(), 0) << "a call failed across the partition";
  uint8_t buf[16];
  EXPECT_EQ(rpmem_read(rpp, buf, 0, sizeof(buf), 0), 0) << "in sync, the replica is a source";
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  EXPECT_TRUE(same_bytes(target_.remote_pool({{pool_size, "p.part0"}}, false).data(), local.data(),
                         0, pool_size));
  const long long resent = resent_bytes(target_);
  EXPECT_GE(resent, static_cast<long long>(ahead)) << target_.log_text();
  EXPECT_LE(resent, static_cast<long long>(2 * ahead)) << "more than what changed was sent";
  EXPECT_FALSE(has_record(state_));
  std::vector<double> in_sync, catching_up;
  for (const auto &[t, us] : counted)
    if (t < cut_at)
      in_sync.push_back(us);
    else if (t >= reattached && t < caught_up)
      catching_up.push_back(us);
  const auto ms = [](Clock::duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  std::printf(
      "figures: a %lld s partition, a %zu MiB pool, %zu MiB rewritten: %llu persists of 4 KiB "
      "behind (%.0f/s, the slowest but the first %.1f us); reattached %lld ms after the link "
      "came back, in sync %lld ms later, %lld bytes sent again; the counter's median "
      "%.1f us in sync, %.1f us while catching up (%zu calls)\n",
      static_cast<long long>(cut_for.count()), pool_size / kMiB, ahead / kMiB,
      static_cast<unsigned long long>(behind_calls),
      static_cast<double>(behind_calls) / std::chrono::duration<double>(healed - cut_at).count(),
      std::chrono::duration<double, std::micro>(slowest).count(), ms(reattached - healed),
      ms(caught_up - reattached), resent, median(in_sync), median(catching_up), catching_up.size());
}

TEST_F(RunAheadCut, AClientKilledBehindKeepsOthersOffTheReplicaAndCatchesUpAtItsNextOpen) {
  const std::string dir = target_.dir();
  FilePool local(dir + "/local.pool", kBig, true);
  std::memset(local.data(), 0x11, kBig);
  set_env("RPMEM_TEST_AHEAD_TARGET", ns_ip_);
  set_env("RPMEM_TEST_AHEAD_CHILD", dir);
  pid_t child = -1;
  char *argv[] = {const_cast<char *>("/proc/self/exe"), nullptr};
  const int rc = ::posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argv, environ);
  ::unsetenv("RPMEM_TEST_AHEAD_CHILD");
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(wait_for(dir + "/ready", std::chrono::seconds(60))) << target_.log_text();
  ASSERT_TRUE(cut());
  touch(dir + "/cut");
  const bool behind = wait_for(dir + "/behind", std::chrono::seconds(60));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(behind) << "the child ended with " << status;
  ASSERT_TRUE(heal());
  ASSERT_TRUE(has_record(state_));
  // Another client, with no record: the replica is behind, it may not open
  // it (its killed session's last rpmemd may still hold it a moment).
  set_env("RPMEM_STATE_DIR", dir + "/another");
  ::unsetenv("RPMEM_ON_LOSS");
  LocalPool other(kBig, 9);
  unsigned nl = 2;
  RPMEMpool *rpp = nullptr;
  int err = EBUSY;
  for (auto end = Clock::now() + std::chrono::seconds(20); err == EBUSY && Clock::now() < end;) {
    rpp = rpmem_open(ns_ip_.c_str(), "p.set", other.data(), kBig, &nl, nullptr);
    err = rpp ? 0 : errno;
    if (err == EBUSY) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(rpp, nullptr) << "a replica behind was opened by another client";
  EXPECT_EQ(err, ESTALE);
  EXPECT_STREQ(rpmem_errormsg(), "Pool may be behind its master");
  // The killed client again: its record, without RPMEM_ON_LOSS.
  set_env("RPMEM_STATE_DIR", state_);
  rpp = rpmem_open(ns_ip_.c_str(), "p.set", local.data(), kBig, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  uint8_t buf[16];
  EXPECT_EQ(rpmem_read(rpp, buf, 0, sizeof(buf), 0), -1) << "a replica behind is no source";
  EXPECT_EQ(errno, ESTALE);
  local.data()[kBig - 1] ^= 1;
  ASSERT_EQ(rpmem_persist(rpp, kBig - 1, 1, 1, 0), 0) << rpmem_errormsg();
  EXPECT_TRUE(record_gone(state_, std::chrono::seconds(30))) << target_.log_text();
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  EXPECT_TRUE(replica_is(local.data()));
  const long long resent = resent_bytes(target_);
  EXPECT_GE(resent, static_cast<long long>(kAhead)) << target_.log_text();
  EXPECT_LE(resent, static_cast<long long>(2 * kAhead)) << "more than what changed was sent";
  // In sync and closed: the replica is anyone's again.
  set_env("RPMEM_STATE_DIR", dir + "/another");
  rpp = rpmem_open(ns_ip_.c_str(), "p.set", other.data(), kBig, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(rpp), 0);
}

}  // namespace
}  // namespace rpmem_test
