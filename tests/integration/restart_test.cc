// SPDX-License-Identifier: BSD-3-Clause
// A restart of the service is a blip: a client reopens its pool as the same
// session (its token) and sends again what was not acknowledged; a reopen
// whose answer is lost can be tried again; a pool someone else opened,
// removed or made anew meanwhile is never reattached; a service that does
// not come back within the bound fails the calls in time.
#include "tests/integration/block_writer.h"
#include "tests/integration/harness.h"
#include "tests/integration/raw_peer.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/tls_peer.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {
namespace {

// ---------------------------------------------------------------------------
// A restart of the service is a blip: a client reopens its pool as the same
// session and sends again what was not acknowledged.

class Restart : public Service, public ::testing::WithParamInterface<int> {
 protected:
  // Each block each writer wrote, in the pool (read through the lanes)
  // and, once it is closed, in its part file.
  void expect_blocks(RPMEMpool *rpp, const LocalPool &local, const std::string &part) {
    std::vector<uint8_t> back(64 * 4096);
    for (unsigned lane = 0; lane < 2; ++lane) {
      const size_t base = 4096 + lane * kMiB;
      ASSERT_EQ(rpmem_read(rpp, back.data(), base, back.size(), lane), 0) << rpmem_errormsg();
      EXPECT_TRUE(same_bytes(back.data(), local.data() + base, 0, back.size())) << part;
    }
    ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
    const auto file = read_file(target_.part_path(part));
    ASSERT_EQ(file.size(), kPool);
    for (unsigned lane = 0; lane < 2; ++lane)
      EXPECT_TRUE(same_bytes(file.data(), local.data(), 4096 + lane * kMiB, 64 * 4096)) << part;
  }
};

// Two clients streaming; the service stopped (SIGTERM: it makes the pools
// durable first; SIGKILL: what was acknowledged is durable already) and
// started again 1 s later with the same configuration: no call fails.
TEST_P(Restart, ClientsRideItOutAndLoseNoAcknowledgedByte) {
  LocalPool a(kPool, 1), b(kPool, 2);
  unsigned nl = 2;
  RPMEMpool *ra = create("p.set", a, nl);
  ASSERT_NE(ra, nullptr) << rpmem_errormsg();
  as("bob");
  nl = 2;
  RPMEMpool *rb = create("p.set", b, nl);
  ASSERT_NE(rb, nullptr) << rpmem_errormsg();
  BlockWriter w[4];
  for (unsigned i = 0; i < 4; ++i)
    w[i].start(i < 2 ? ra : rb, (i < 2 ? a : b).data(), i % 2, 4096 + (i % 2) * kMiB, 64);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int status = stop_daemon(GetParam());
  const auto stopped_at = Clock::now();
  if (GetParam() == SIGTERM) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  uint64_t before[4];
  for (unsigned i = 0; i < 4; ++i) before[i] = w[i].calls.load();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  start_daemon();
  ASSERT_TRUE(can_connect(port_)) << "the service did not start again:\n" << log();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (auto &x : w) x.join();
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(w[i].err, 0) << "writer " << i << ": " << w[i].msg << " "
                           << std::chrono::duration<double>(w[i].failed_at - stopped_at).count()
                           << " s after the stop";
    EXPECT_GT(w[i].calls.load(), before[i]) << "writer " << i << " did not go on";
  }
  EXPECT_TRUE(log_shows("pool set 'p.set' reopened by its session of before the restart")) << log();
  EXPECT_NE(library_log().find("the service ended the session; opening pool 'p.set' again"),
            std::string::npos)
      << library_log();
  expect_blocks(ra, a, "alice.part");
  expect_blocks(rb, b, "bob.part");
}

INSTANTIATE_TEST_SUITE_P(Signals, Restart, ::testing::Values(SIGTERM, SIGKILL),
                         [](const auto &p) { return p.param == SIGTERM ? "Sigterm" : "Sigkill"; });

// The service does not come back within the bound: the stalled calls fail
// in time, naming the cause, and close returns at once.
TEST_F(Service, ARestartPastTheBoundFailsInTimeAndClosesAtOnce) {
  set_env("RPMEM_TIMEOUT", "2");
  LocalPool local(kPool);
  unsigned nl = 2;
  RPMEMpool *rpp = create("p.set", local, nl);
  ::unsetenv("RPMEM_TIMEOUT");
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  BlockWriter w[2];
  for (unsigned i = 0; i < 2; ++i) w[i].start(rpp, local.data(), i, 4096 + i * kMiB, 64);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop_daemon(SIGTERM);
  const auto stopped_at = Clock::now();
  for (auto &x : w) x.wait();
  for (auto &x : w) {
    EXPECT_EQ(x.err, ECONNRESET) << x.msg;
    EXPECT_LT(x.failed_at - stopped_at, std::chrono::milliseconds(3500));
    EXPECT_NE(x.msg.find("no answer from the target for 2 s"), std::string::npos) << x.msg;
  }
  const auto start = Clock::now();
  EXPECT_EQ(rpmem_close(rpp), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

// Another process of the same client takes the pool while the service is
// down: the first client, reopening, is refused clearly, and writes
// nothing over the other's bytes.
TEST_F(Service, ARestartDuringWhichAnotherProcessTakesThePoolFailsTheFirstClearly) {
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the first client
    LocalPool local(kPool, 7);
    unsigned nl = 1;
    RPMEMpool *rpp = create("p.set", local, nl);
    char c = rpp && rpmem_persist(rpp, 4096, 4096, 0, 0) == 0 ? 'r' : 'x';
    [[maybe_unused]] auto n = ::write(to_parent[1], &c, 1);
    if (::read(to_child[0], &c, 1) != 1) ::_exit(3);
    // Its service restarted, and another session opened the pool meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const int rc = rpp ? rpmem_persist(rpp, 8192, 4096, 0, 0) : -1;
    const std::string msg = rc ? rpmem_errormsg() : "";
    const int err = rc ? errno : 0;
    std::string report = std::to_string(err) + " " + msg;
    n = ::write(to_parent[1], report.data(), report.size());
    ::_exit(rpp && rpmem_close(rpp) == -1 ? 0 : 4);
  }
  char c = 0;
  ASSERT_EQ(::read(to_parent[0], &c, 1), 1);
  ASSERT_EQ(c, 'r') << "the first client could not create its pool";
  ::kill(child, SIGSTOP);  // it cannot reopen before the other has been
  stop_daemon(SIGTERM);
  start_daemon();
  ASSERT_TRUE(can_connect(port_));
  LocalPool other(kPool, 9);
  unsigned nl = 1;
  RPMEMpool *rpp = rpmem_open(target_str_.c_str(), "p.set", other.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  ASSERT_EQ(rpmem_persist(rpp, 8192, 4096, 0, 0), 0);
  ASSERT_EQ(rpmem_close(rpp), 0);
  ::kill(child, SIGCONT);
  ASSERT_EQ(::write(to_child[1], "g", 1), 1);
  char report[512] = {};
  const ssize_t n = ::read(to_parent[0], report, sizeof(report) - 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_GT(n, 0);
  const std::string r(report);
  EXPECT_EQ(r.rfind(std::to_string(ECONNRESET) + " ", 0), 0u) << r;
  EXPECT_NE(r.find("opened by another session while the service restarted"), std::string::npos)
      << r;
  EXPECT_TRUE(log_shows("another session has opened it since")) << log();
  const auto part = read_file(target_.part_path("alice.part"));
  EXPECT_TRUE(same_bytes(part.data(), other.data(), 8192, 4096)) << "the other's bytes";
}

// An orderly restart with 64 pools open is quick: from SIGTERM to the
// new service taking connections (the figure is printed), and each client
// goes on.
TEST_F(Service, ARestartWithSixtyFourOpenPoolsIsQuickAndEveryPoolGoesOn) {
  constexpr unsigned kPools = 64;
  constexpr size_t kSmall = 2 * kMiB;
  std::vector<std::unique_ptr<LocalPool>> locals;
  std::vector<RPMEMpool *> pools;
  for (unsigned i = 0; i < kPools; ++i) {
    const std::string set = "many" + std::to_string(i) + ".set";
    target_.write_poolset("alice/" + set, {{kSmall, "many" + std::to_string(i) + ".part"}},
                          "OPTION NOHDRS\n");
    locals.push_back(std::make_unique<LocalPool>(kSmall, static_cast<uint8_t>(i)));
    unsigned nl = 1;
    RPMEMpool *rpp =
        rpmem_create(target_str_.c_str(), set.c_str(), locals.back()->data(), kSmall, &nl, nullptr);
    ASSERT_NE(rpp, nullptr) << i << ": " << rpmem_errormsg();
    ASSERT_EQ(rpmem_persist(rpp, 0, 4096, 0, 0), 0) << rpmem_errormsg();
    pools.push_back(rpp);
  }
  const auto t0 = Clock::now();
  const int status = stop_daemon(SIGTERM);
  const auto t1 = Clock::now();
  start_daemon();
  ASSERT_TRUE(can_connect(port_));
  const auto t2 = Clock::now();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const double stop_s = std::chrono::duration<double>(t1 - t0).count();
  const double start_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("restart with %u open pools: SIGTERM to exit %.3f s, start to accepting %.3f s\n",
              kPools, stop_s, start_s);
  EXPECT_LT(stop_s + start_s, 2.0) << "stop " << stop_s << " s, start " << start_s << " s";
  for (unsigned i = 0; i < kPools; ++i) {
    locals[i]->fill(8192, 4096, static_cast<uint8_t>(100 + i));
    EXPECT_EQ(rpmem_persist(pools[i], 8192, 4096, 0, 0), 0) << i << ": " << rpmem_errormsg();
    EXPECT_EQ(rpmem_close(pools[i]), 0) << i << ": " << rpmem_errormsg();
    const auto part = read_file(target_.part_path("many" + std::to_string(i) + ".part"));
    ASSERT_EQ(part.size(), kSmall);
    EXPECT_TRUE(same_bytes(part.data(), locals[i]->data(), 0, 4096)) << i;
    EXPECT_TRUE(same_bytes(part.data(), locals[i]->data(), 8192, 4096)) << i;
  }
}

// ---------------------------------------------------------------------------
// The session token across faults: a reopen's answer lost, a remove that
// failed, and someone else at the pool while the service was down.

class Reopen : public Service {
 protected:
  // A pool request of `type` on a control connection of the test's own, as
  // alice: the answer (nullopt when none came). With `lose_answer` the
  // connection is closed as soon as the request is sent: the service
  // serves it, and its answer is lost.
  std::optional<proto::PoolResponse> raw_request(proto::MsgType type, const proto::PoolRequest &req,
                                                 bool lose_answer = false) {
    TlsPeer control(static_cast<uint16_t>(port_), cert_client_context(target_.dir(), "alice"));
    if (!control.handshaken()) return std::nullopt;
    proto::Bytes payload;
    if (!read_frame(control, proto::MsgType::kHello, payload)) return std::nullopt;
    const proto::Bytes frame = proto::encode(type, req);
    if (!control.send(frame.data(), frame.size()) || lose_answer) return std::nullopt;
    if (!read_frame(control, proto::MsgType::kPoolResp, payload)) return std::nullopt;
    return proto::decode_pool_response(payload);
  }
  // A reopen of alice's p.set with `token`, tried until the pool is no
  // longer busy (an earlier session still holding it), within 10 s.
  std::optional<proto::PoolResponse> reopen(const proto::Bytes &token) {
    proto::PoolRequest req = pool_request("p.set", kPool, 1, false);
    req.extended = req.reopen = true;
    std::copy(token.begin(), token.end(), req.token.begin());
    std::optional<proto::PoolResponse> r;
    for (int i = 0; i < 100; ++i) {
      r = raw_request(proto::MsgType::kOpen, req);
      if (!r || r->status != proto::Status::kBusy) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return r;
  }
  // librpmem's pool on p.set, one block persisted; then the service is
  // killed (the session does not end cleanly: its token stays).
  RPMEMpool *open_then_kill(LocalPool &local) {
    unsigned nl = 1;
    RPMEMpool *rpp = create("p.set", local, nl);
    if (!rpp) return nullptr;
    local.fill(4096, 4096, 0x11);
    EXPECT_EQ(rpmem_persist(rpp, 4096, 4096, 0, 0), 0) << rpmem_errormsg();
    stop_daemon(SIGKILL);
    return rpp;
  }
  // After the service is back: the client's next call fails, naming the
  // cause, and alice's part holds `other`'s bytes at 8192, not the client's.
  void expect_not_reattached(RPMEMpool *rpp, LocalPool &local, const proto::Bytes &other) {
    start_daemon();
    ASSERT_TRUE(can_connect(port_));
    local.fill(8192, 4096, 0x22);
    EXPECT_EQ(rpmem_persist(rpp, 8192, 4096, 0, 0), -1) << "reattached to another pool";
    EXPECT_EQ(errno, ECONNRESET);
    EXPECT_NE(std::string(rpmem_errormsg()).find("opened by another session"), std::string::npos)
        << rpmem_errormsg();
    EXPECT_EQ(rpmem_close(rpp), -1);
    const auto part = read_file(target_.part_path("alice.part"));
    ASSERT_GE(part.size(), 8192 + other.size());
    EXPECT_TRUE(std::equal(other.begin(), other.end(), part.begin() + 8192)) << "overwritten";
  }

 private:
  static bool read_frame(TlsPeer &c, proto::MsgType type, proto::Bytes &payload) {
    uint8_t hdr[proto::kFrameHeaderSize];
    if (!c.recv(hdr, sizeof(hdr))) return false;
    auto h = proto::decode_frame_header(hdr);
    if (!h || h->type != type) return false;
    payload.resize(h->size);
    return c.recv(payload.data(), payload.size());
  }
};

// The restarted service reopens the pool and writes a new token, and the
// answer never reaches the client: the client's next try, with the token
// it holds, succeeds. A session that opened the pool in between (without a
// token) leaves neither token able to reopen it.
TEST_F(Reopen, AReopenWhoseAnswerIsLostCanBeTriedAgainWithTheSameToken) {
  if (verbs_only()) GTEST_SKIP() << "the raw requests ask for tcp lanes";
  proto::PoolRequest req = pool_request("p.set", kPool, 1, false);
  auto first = raw_request(proto::MsgType::kCreate, req);
  ASSERT_TRUE(first && first->status == proto::Status::kSuccess);
  ASSERT_EQ(first->token.size(), proto::kTokenSize);
  const proto::Bytes t0 = first->token;
  stop_daemon(SIGKILL);
  start_daemon();
  ASSERT_TRUE(can_connect(port_));
  proto::PoolRequest again = pool_request("p.set", kPool, 1, false);
  again.extended = again.reopen = true;
  std::copy(t0.begin(), t0.end(), again.token.begin());
  EXPECT_FALSE(raw_request(proto::MsgType::kOpen, again, true));
  ASSERT_TRUE(log_shows("reopened by its session of before the restart")) << log();
  auto retried = reopen(t0);
  ASSERT_TRUE(retried);
  EXPECT_EQ(retried->status, proto::Status::kSuccess) << "the lost answer used the token up";
  ASSERT_EQ(retried->token.size(), proto::kTokenSize);
  const proto::Bytes t2 = retried->token;
  // Another session opens the pool, and goes without closing it.
  auto other = raw_request(proto::MsgType::kOpen, pool_request("p.set", kPool, 1, false));
  ASSERT_TRUE(other);
  for (int i = 0; i < 100 && other->status == proto::Status::kBusy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    other = raw_request(proto::MsgType::kOpen, pool_request("p.set", kPool, 1, false));
    ASSERT_TRUE(other);
  }
  ASSERT_EQ(other->status, proto::Status::kSuccess);
  for (const proto::Bytes &t : {t0, t2}) {
    auto late = reopen(t);
    ASSERT_TRUE(late);
    EXPECT_EQ(late->status, proto::Status::kStale);
  }
}

// A remove refused because the pool is open leaves the pool its session:
// the client then rides a restart out.
TEST_F(Reopen, ARemoveRefusedBecauseThePoolIsOpenKeepsItsSessionAcrossARestart) {
  LocalPool local(kPool, 3);
  unsigned nl = 2;
  RPMEMpool *rpp = create("p.set", local, nl);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  BlockWriter w[2];
  for (unsigned i = 0; i < 2; ++i) w[i].start(rpp, local.data(), i, 4096 + i * kMiB, 64);
  EXPECT_EQ(rpmem_remove(target_str_.c_str(), "p.set", 0), -1) << "removed an open pool";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop_daemon(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  start_daemon();
  ASSERT_TRUE(can_connect(port_));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (auto &x : w) x.join();
  for (auto &x : w) EXPECT_EQ(x.err, 0) << x.msg;
  EXPECT_TRUE(log_shows("reopened by its session of before the restart")) << log();
  ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  const auto part = read_file(target_.part_path("alice.part"));
  for (unsigned lane = 0; lane < 2; ++lane)
    EXPECT_TRUE(same_bytes(part.data(), local.data(), 4096 + lane * kMiB, 64 * 4096));
}

// An ssh-mode rpmemd opens the pool while the service is down, and writes:
// the client's reopen is refused (its writes would go over the other's).
TEST_F(Reopen, APoolAnSshModeDaemonOpenedMeanwhileIsNotReattached) {
  if (verbs_only()) GTEST_SKIP() << "the raw lane is a tcp lane";
  LocalPool local(kPool, 4);
  RPMEMpool *rpp = open_then_kill(local);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  const proto::Bytes other(4096, 0x99);
  {
    RawDaemon d(target_);
    ASSERT_TRUE(d.read_hello());
    auto r = d.request(proto::MsgType::kOpen, pool_request("alice/p.set", kPool, 1, false));
    ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
    proto::Bytes p;
    PlainPeer lane(r->port);
    const proto::Bytes hello = lane_hello_bytes(r->secret, 0, 1);
    uint8_t rb[proto::kLaneHelloReplySize];
    ASSERT_TRUE(lane.send(hello.data(), hello.size()) && lane.recv(rb, sizeof(rb)));
    ASSERT_EQ(lane_persist(lane, 8192, other), 0);
    ASSERT_TRUE(d.send(proto::encode(proto::CloseRequest{})));
    ASSERT_TRUE(d.read_frame(p));
  }
  expect_not_reattached(rpp, local, other);
}

// rpmemd --remove, then a create of the same pool set, while the service
// is down: the pool is another one, and is not reattached.
TEST_F(Reopen, APoolRemovedAndCreatedAgainMeanwhileIsNotReattached) {
  LocalPool local(kPool, 5);
  RPMEMpool *rpp = open_then_kill(local);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  int status = 0;
  command_output(
      std::string(RPMEMD_PATH) + " -c " + target_.dir() + "/rpmemd.conf --remove alice/p.set 2>&1",
      &status);
  ASSERT_EQ(status, 0);
  ASSERT_FALSE(file_exists(target_.part_path("alice.part")));
  // The pool made again by someone else, with bytes of theirs at 8192.
  std::vector<uint8_t> made(kPool, 0);
  const proto::Bytes other(4096, 0x77);
  std::copy(other.begin(), other.end(), made.begin() + 8192);
  std::ofstream(target_.part_path("alice.part"), std::ios::binary)
      .write(reinterpret_cast<const char *>(made.data()), static_cast<long>(made.size()));
  expect_not_reattached(rpp, local, other);
}

// The part file copied and put back (pmempool, cp, a restore) while the
// service is down: a pool without a header has no attributes to compare,
// but its files are others, and it is not reattached.
TEST_F(Reopen, APoolWhosePartWasReplacedMeanwhileIsNotReattached) {
  LocalPool local(kPool, 6);
  RPMEMpool *rpp = open_then_kill(local);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  const std::string part = target_.part_path("alice.part");
  std::vector<uint8_t> bytes = read_file(part);
  const proto::Bytes other(4096, 0x55);
  std::copy(other.begin(), other.end(), bytes.begin() + 8192);
  ASSERT_EQ(::unlink(part.c_str()), 0);
  std::ofstream(part, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), static_cast<long>(bytes.size()));
  expect_not_reattached(rpp, local, other);
  EXPECT_TRUE(log_shows("its part files were replaced since")) << log();
}

}  // namespace
}  // namespace rpmem_test
