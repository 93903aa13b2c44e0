// SPDX-License-Identifier: BSD-3-Clause
// The rules of a pool's life, over fake lanes and a fake daemon
// (fake_target.h), in milliseconds: calls go to their lane; a bad argument
// or a target's error fails that call only; a lane lost for good loses the
// pool (every lane shut down, stalled calls return, later calls fail at
// once with the cause, close returns at once); an ssh session's end loses
// it; a service's restart is coming back, then in sync on the reopened
// session (its route, its new token), or lost with the cause when the
// reopen is refused or the service stays away; a reopen that finds the
// pool busy tries again. One test per rule against a real daemon stays in
// tests/integration (docs/testing.md says which).
#include "librpmem/pool.h"

#include "tests/unit/librpmem/pool_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "librpmem.h"

namespace rpmem::test {
namespace {

using transport::DataOp;

class PoolRules : public PoolFixture {};

TEST_F(PoolRules, CallsGoToTheirLaneWithTheirRangeAndLevel) {
  ASSERT_EQ(create(), 0) << msg();
  ASSERT_EQ(connector_.lanes().size(), 2u);
  EXPECT_EQ(pool_->persist(4096, 100, 1, 0), 0);
  EXPECT_EQ(pool_->flush(8192, 10, 0, RPMEM_PERSIST_RELAXED), 0);
  EXPECT_EQ(pool_->drain(0, 0), 0);
  EXPECT_EQ(pool_->deep_persist(0, 64, 1), 0);  // no header: offset 0 is the client's
  char buf[16];
  EXPECT_EQ(pool_->read(buf, 100, 16, 0), 0);
  const auto c1 = lane(1).calls();
  ASSERT_EQ(c1.size(), 2u);
  EXPECT_EQ(c1[0].op, DataOp::kPersist);
  EXPECT_EQ(c1[0].offset, 4096u);
  EXPECT_EQ(c1[0].length, 100u);
  EXPECT_EQ(c1[1].op, DataOp::kDeepPersist);
  const auto c0 = lane(0).calls();
  ASSERT_EQ(c0.size(), 3u);
  EXPECT_EQ(c0[0].op, DataOp::kFlush);
  EXPECT_EQ(c0[0].flags, transport::kWriteRelaxed);
  EXPECT_EQ(c0[1].op, DataOp::kDrain);
  EXPECT_EQ(c0[2].op, DataOp::kRead);
  EXPECT_EQ(pool_->state(), PoolState::kInSync);
}

TEST_F(PoolRules, ABadArgumentFailsThatCallOnly) {
  ASSERT_EQ(create(), 0) << msg();
  EXPECT_EQ(pool_->persist(0, 10, 2, 0), EINVAL);
  EXPECT_EQ(msg(), "invalid lane number (2), pool has 2 lanes");
  EXPECT_EQ(pool_->persist(kSize - 4, 10, 0, 0), EINVAL);
  EXPECT_NE(msg().find("exceeds pool size"), std::string::npos) << msg();
  EXPECT_EQ(pool_->flush(0, 1, 0, 0x80), EINVAL);
  EXPECT_EQ(pool_->drain(0, RPMEM_PERSIST_VISIBLE | RPMEM_PERSIST_PERSISTENT), EINVAL);
  char buf[4];
  EXPECT_EQ(pool_->read(buf, kSize, 4, 0), EINVAL);
  EXPECT_EQ(msg(), "read operation failed: Invalid argument");
  EXPECT_TRUE(lane(0).calls().empty()) << "a bad call reached the lane";
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), 0);
  EXPECT_EQ(pool_->state(), PoolState::kInSync);
}

TEST_F(PoolRules, ATargetsErrorFailsThatCallOnly) {
  ASSERT_EQ(create(), 0) << msg();
  lane(0).fail_next(EIO);
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), EIO);
  EXPECT_EQ(msg(), "persist operation failed: Input/output error");
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), 0);
  EXPECT_EQ(pool_->state(), PoolState::kInSync);
}

TEST_F(PoolRules, ALaneLostForGoodLosesThePoolAndEveryCallFailsAtOnceWithTheCause) {
  ASSERT_EQ(create(), 0) << msg();
  lane(0).fail_next(ECONNRESET, "no answer from the target for 20 s");
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), ECONNRESET);
  EXPECT_EQ(msg(), "persist operation failed: no answer from the target for 20 s");
  EXPECT_EQ(pool_->state(), PoolState::kLost);
  EXPECT_TRUE(lane(0).dead() && lane(1).dead()) << "the lanes were not shut down";
  const size_t before = lane(1).calls().size();
  EXPECT_EQ(pool_->persist(0, 10, 1, 0), ECONNRESET);
  EXPECT_EQ(msg(), "connection lost: no answer from the target for 20 s");
  EXPECT_EQ(pool_->drain(1, 0), ECONNRESET);
  EXPECT_EQ(pool_->deep_persist(0, 10, 1), ECONNRESET);
  char buf[4];
  EXPECT_EQ(pool_->read(buf, 0, 4, 1), ECONNRESET);
  EXPECT_EQ(msg(), "connection lost: no answer from the target for 20 s");
  EXPECT_EQ(pool_->set_attr(nullptr), ECONNRESET);
  EXPECT_EQ(lane(1).calls().size(), before) << "a call of a lost pool reached a lane";
  // The state is asked before the lane.
  EXPECT_EQ(pool_->persist(0, 10, 9, 0), ECONNRESET);
  const auto start = Clock::now();
  EXPECT_EQ(pool_->close(), ECONNRESET);
  EXPECT_EQ(msg(), "close request failed: no answer from the target for 20 s");
  EXPECT_LT(Clock::now() - start, 500ms);
  for (proto::MsgType t : daemon_.messages())
    EXPECT_NE(t, proto::MsgType::kClose) << "a lost pool sent a close request";
  pool_.reset();
}

TEST_F(PoolRules, ACallStalledOnAnotherLaneReturnsWhenThePoolIsLost) {
  ASSERT_EQ(create(), 0) << msg();
  lane(1).stall();
  int stalled_rc = 0;
  std::thread t([&] { stalled_rc = pool_->persist(0, 10, 1, 0); });
  ASSERT_TRUE(lane(1).wait_stalled());
  lane(0).fail_next(EPROTO);
  const auto start = Clock::now();
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), ECONNRESET);
  t.join();
  EXPECT_EQ(stalled_rc, ECONNRESET);
  EXPECT_LT(Clock::now() - start, 500ms);
  EXPECT_EQ(pool_->state(), PoolState::kLost);
}

TEST_F(PoolRules, TheEndOfAnSshSessionLosesThePoolAtOnce) {
  ASSERT_EQ(create(), 0) << msg();
  daemon_.last_channel()->hang_up();
  ASSERT_TRUE(wait_state(PoolState::kLost));
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), ECONNRESET);
  EXPECT_EQ(msg(), "connection lost: Connection reset by peer");
}

TEST_F(PoolRules, CloseSendsACloseRequestAndEndsThePool) {
  ASSERT_EQ(create(), 0) << msg();
  EXPECT_EQ(pool_->set_attr(nullptr), 0);
  EXPECT_EQ(pool_->close(), 0) << msg();
  EXPECT_EQ(pool_->state(), PoolState::kClosed);
  const auto m = daemon_.messages();
  EXPECT_NE(std::find(m.begin(), m.end(), proto::MsgType::kSetAttr), m.end());
  EXPECT_EQ(m.back(), proto::MsgType::kClose);
  pool_.reset();
}

TEST_F(PoolRules, ARefusedCreateIsItsErrnoAndMessage) {
  daemon_.answer_next(proto::Status::kBusy);
  EXPECT_EQ(create(), EBUSY);
  EXPECT_EQ(msg(), proto::status_message(proto::Status::kBusy));
  EXPECT_EQ(pool_, nullptr);
}

TEST_F(PoolRules, AWrongDurabilityFailsCreateBeforeAnyConnection) {
  settings_.bad = "RPMEM_DURABILITY: invalid value 'fast' (persistent or visible)";
  EXPECT_EQ(create(), EINVAL);
  EXPECT_EQ(msg(), settings_.bad);
  EXPECT_TRUE(daemon_.requests().empty());
}

// --- a service that restarts -------------------------------------------------

// Restarts the service: its channel ends, and it answers again once up.
class ServiceRestart : public PoolRules {
 protected:
  void restart(std::chrono::milliseconds down_for) {
    daemon_.down(true);
    daemon_.last_channel()->hang_up();
    ASSERT_TRUE(wait_state(PoolState::kComingBack, 1s));
    std::this_thread::sleep_for(down_for);
    daemon_.down(false);
  }
};

TEST_F(ServiceRestart, IsComingBackThenInSyncOnTheReopenedSession) {
  ASSERT_EQ(create("rpmems://host"), 0) << msg();
  ASSERT_NE(connector_.route, nullptr) << "service lanes that come back have a route";
  const uint16_t first_port = connector_.route->get().port;
  restart(300ms);
  ASSERT_TRUE(wait_state(PoolState::kInSync));
  const auto reqs = daemon_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[1].reopen);
  EXPECT_EQ(proto::Bytes(reqs[1].token.begin(), reqs[1].token.end()),
            proto::Bytes(proto::kTokenSize, static_cast<uint8_t>(first_port)))
      << "the reopen proves the token the create gave";
  EXPECT_EQ(connector_.route->get().port, daemon_.port()) << "the lanes' route moved";
  EXPECT_EQ(connector_.lanes().size(), 2u) << "the lanes themselves come back";
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), 0);
  // Another restart: the reopen proves the token of the last one.
  const uint16_t second_port = daemon_.port();
  restart(0ms);
  ASSERT_TRUE(wait_state(PoolState::kInSync));
  ASSERT_EQ(daemon_.requests().size(), 3u);
  EXPECT_EQ(daemon_.requests()[2].token[0], static_cast<uint8_t>(second_port));
}

TEST_F(ServiceRestart, AReopenRefusedAsStaleLosesThePoolNamingWhy) {
  ASSERT_EQ(create("rpmems://host"), 0) << msg();
  daemon_.answer_next(proto::Status::kStale);
  restart(0ms);
  ASSERT_TRUE(wait_state(PoolState::kLost));
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), ECONNRESET);
  EXPECT_NE(msg().find("opened by another session while the service restarted"), std::string::npos)
      << msg();
}

TEST_F(ServiceRestart, AReopenThatFindsThePoolBusyTriesAgain) {
  ASSERT_EQ(create("rpmems://host"), 0) << msg();
  daemon_.answer_next(proto::Status::kBusy);
  daemon_.answer_next(proto::Status::kBusy);
  restart(0ms);
  ASSERT_TRUE(wait_state(PoolState::kInSync));
  EXPECT_EQ(daemon_.requests().size(), 4u);  // the create, two busy, the reopen
}

TEST_F(ServiceRestart, AServiceThatStaysAwayPastTheBoundLosesThePool) {
  settings_.timeout = 600ms;
  ASSERT_EQ(create("rpmems://host"), 0) << msg();
  const auto start = Clock::now();
  restart(0ms);
  daemon_.down(true);
  ASSERT_TRUE(wait_state(PoolState::kLost, 2s));
  EXPECT_LT(Clock::now() - start, 1500ms);
  EXPECT_EQ(pool_->persist(0, 10, 0, 0), ECONNRESET);
  EXPECT_NE(msg().find("no answer from the target for 600 ms (the service did not come back)"),
            std::string::npos)
      << msg();
}

TEST_F(ServiceRestart, CloseDuringTheReopenReturnsAtOnce) {
  ASSERT_EQ(create("rpmems://host"), 0) << msg();
  restart(0ms);
  daemon_.down(true);
  const auto start = Clock::now();
  pool_->close();
  EXPECT_LT(Clock::now() - start, 500ms);
  pool_.reset();
}

}  // namespace
}  // namespace rpmem::test
