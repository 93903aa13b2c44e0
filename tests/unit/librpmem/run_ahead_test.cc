// SPDX-License-Identifier: BSD-3-Clause
// A pool that runs ahead of its lost target (RPMEM_ON_LOSS=continue), over
// fake lanes that land their bytes in the fake daemon's replica: no call
// fails, what the calls cover (and what the lanes had not had acknowledged)
// is marked, the record is on storage before anything runs ahead; the pool
// reattaches as its own session, sends again only the marked pages (and
// what the application wrote over a copy in flight), proves them with the
// target's checksums, and is in sync with a replica equal to its memory; a
// close while behind keeps the record, and the next open catches up from
// the application's first write; reads of a replica behind fail.
#include "librpmem/state_record.h"
#include "tests/unit/librpmem/pool_fixture.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "librpmem.h"

namespace rpmem::test {
namespace {

using transport::DataOp;
constexpr uint64_t kPage = 4096;

class RunAhead : public PoolFixture {
 protected:
  RunAhead() {
    char tmpl[] = "/tmp/rpmem-state-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    settings_.state_dir = dir_ + "/state";
    settings_.run_ahead = true;
    daemon_.replica.assign(kSize, 0);
  }
  ~RunAhead() override {
    if (pool_) pool_->close();
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }
  StateRecord record() const { return StateRecord(settings_.state_dir, "host", "p.set"); }
  // Writes `byte` over [offset, +length) of the local pool and persists it.
  int write(uint64_t offset, uint64_t length, uint8_t byte, unsigned lane = 0) {
    std::memset(local_ + offset, byte, length);
    return pool_->persist(offset, length, lane, 0);
  }
  bool replica_matches() const { return std::memcmp(local_, daemon_.replica.data(), kSize) == 0; }
  // Bytes the lanes from `first` on wrote (persists: the catch-up's copies).
  uint64_t written_from(size_t first) {
    uint64_t n = 0;
    const auto all = connector_.lanes();
    for (size_t i = first; i < all.size(); ++i)
      for (const auto &c : all[i]->calls())
        if (c.op == DataOp::kPersist) n += c.length;
    return n;
  }
  // Loses the target: lane 0's next call fails for good, and the daemon is
  // down until up() (a reattach fails meanwhile).
  void lose() {
    daemon_.down(true);
    lane(0).fail_next(ECONNRESET, "no answer from the target for 1500 ms");
  }

  // In sync, and its record gone: the catch-up is over.
  bool caught_up() {
    if (!wait_state(PoolState::kInSync, std::chrono::seconds(5))) return false;
    for (auto end = Clock::now() + std::chrono::seconds(2); record().load() && Clock::now() < end;)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return !record().load();
  }

  std::string dir_;
};

TEST_F(RunAhead, ALostTargetIsRunAheadOfAndNoCallFails) {
  ASSERT_EQ(create(), 0) << msg();
  ASSERT_EQ(write(0, 100, 1), 0);
  lose();
  EXPECT_EQ(write(8 * kPage, 10, 2), 0) << msg();
  EXPECT_EQ(pool_->state(), PoolState::kBehind);
  EXPECT_TRUE(lane(0).dead() && lane(1).dead()) << "the lost lanes were not shut down";
  const size_t reached = lane(1).calls().size();
  EXPECT_EQ(write(20 * kPage, 3 * kPage, 3, 1), 0);
  EXPECT_EQ(pool_->flush(40 * kPage, 1, 1, 0), 0);
  EXPECT_EQ(pool_->drain(1, 0), 0);
  EXPECT_EQ(pool_->deep_persist(50 * kPage, 1, 0), 0);
  EXPECT_EQ(lane(1).calls().size(), reached) << "a call behind reached a lane";
  char buf[4];
  EXPECT_EQ(pool_->read(buf, 0, 4, 0), ESTALE);
  EXPECT_NE(msg().find("behind"), std::string::npos) << msg();
  EXPECT_EQ(pool_->set_attr(nullptr), ENOTCONN);
  // The record is on storage, the map unsaved (the pool is open).
  auto rec = record().load();
  ASSERT_TRUE(rec);
  EXPECT_FALSE(rec->saved);
  EXPECT_EQ(rec->pool_size, kSize);
  EXPECT_NE(rec->behind_since_s, 0u);
  // A bad argument is still one.
  EXPECT_EQ(pool_->persist(kSize, 1, 0, 0), EINVAL);
  EXPECT_EQ(pool_->persist(0, 1, 7, 0), EINVAL);
}

TEST_F(RunAhead, CatchesUpSendingOnlyTheMarkedPagesAndProvingThem) {
  ASSERT_EQ(create(), 0) << msg();
  ASSERT_EQ(write(0, kSize, 7), 0);  // in sync: the replica has it all
  ASSERT_TRUE(replica_matches());
  lane(1).unacked({{30 * kPage + 5, 2 * kPage}});  // flushed, never acknowledged
  std::memset(local_ + 30 * kPage, 9, 3 * kPage);
  lose();
  ASSERT_EQ(write(8 * kPage + 100, 10, 2), 0);  // the failing call: one page
  ASSERT_EQ(write(20 * kPage, 3 * kPage, 3, 1), 0);
  ASSERT_EQ(pool_->state(), PoolState::kBehind);
  const size_t first_new = connector_.lanes().size();
  daemon_.down(false);
  ASSERT_TRUE(caught_up());
  EXPECT_TRUE(replica_matches());
  // 1 + 3 written behind, 3 the lane had not had acknowledged.
  EXPECT_EQ(written_from(first_new), 7 * kPage);
  const auto reqs = daemon_.requests();
  ASSERT_GE(reqs.size(), 2u);
  EXPECT_TRUE(reqs.back().reopen) << "the reattach is this client's session";
  EXPECT_TRUE(reqs.back().ahead && (reqs.back().ahead_flags & proto::kRunAhead));
  proto::SessionToken created;
  created.fill(static_cast<uint8_t>(7001));  // the fake daemon's first token
  EXPECT_EQ(reqs.back().token, created) << "the reattach proves the create's token";
  // The report of it follows the move to in sync.
  for (auto end = Clock::now() + std::chrono::seconds(2);
       (daemon_.reports().empty() || daemon_.reports().back().state != proto::PoolSync::kInSync) &&
       Clock::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(record().load()) << "the record outlived the catch-up";
  const auto reports = daemon_.reports();
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().state, proto::PoolSync::kInSync);
  EXPECT_EQ(reports.back().bytes_done, 7 * kPage);
  // In sync again: calls reach the new lanes.
  EXPECT_EQ(write(0, 10, 4), 0);
  EXPECT_EQ(daemon_.replica[0], 4);
}

TEST_F(RunAhead, APageThatDiffersFromTheTargetsChecksumIsSentAgain) {
  ASSERT_EQ(create(), 0) << msg();
  lose();
  ASSERT_EQ(write(3 * kPage, kPage, 5), 0);
  connector_.on_lanes = [](FakeLane &l, unsigned i) {
    if (i == 0) l.drop_writes(1);  // acknowledged, never landed
  };
  daemon_.down(false);
  ASSERT_TRUE(caught_up());
  EXPECT_TRUE(replica_matches());
  const size_t n = connector_.lanes().size();
  EXPECT_EQ(written_from(n - 2), 2 * kPage) << "the page went once more";
}

TEST_F(RunAhead, AWriteOverACopyInFlightIsNotUndone) {
  ASSERT_EQ(create(), 0) << msg();
  lose();
  ASSERT_EQ(write(0, 4 * kPage, 1), 0);
  // While the catch-up's copy of the pages is on its way (its bytes
  // taken), the application writes them anew through the other lane,
  // which lands first.
  connector_.on_lanes = [this](FakeLane &l, unsigned i) {
    if (i != 0) return;
    l.in_flight = [this, done = false](const FakeLane::Call &c) mutable {
      if (done || c.op != DataOp::kPersist) return;
      done = true;
      std::memset(local_ + kPage, 2, kPage);
      EXPECT_EQ(pool_->persist(kPage, kPage, 1, 0), 0);
    };
  };
  daemon_.down(false);
  ASSERT_TRUE(caught_up());
  EXPECT_EQ(daemon_.replica[kPage], 2) << "the copy in flight undid the application's write";
  EXPECT_TRUE(replica_matches());
}

// Without the target's checksums (a record's pool on a target of protocol
// 1.9), the pages written over a copy in flight are what sends them again.
TEST_F(RunAhead, AWriteOverACopyInFlightIsNotUndoneWithoutTheTargetsChecksums) {
  ASSERT_EQ(create(), 0) << msg();
  lose();
  ASSERT_EQ(write(0, 4 * kPage, 1), 0);
  ASSERT_EQ(pool_->close(), 0);
  pool_.reset();
  daemon_.minor(proto::kMinorRunAhead - 1);
  daemon_.down(false);
  connector_.on_lanes = [this](FakeLane &l, unsigned i) {
    if (i != 0) return;
    l.in_flight = [this, done = false](const FakeLane::Call &c) mutable {
      if (done || c.op != DataOp::kPersist || c.offset != 0) return;
      done = true;
      std::memset(local_ + kPage, 2, kPage);
      EXPECT_EQ(pool_->persist(kPage, kPage, 1, 0), 0);
    };
  };
  ASSERT_EQ(connect(false), 0) << msg();
  ASSERT_EQ(write(9 * kPage, 1, 3, 1), 0);  // the first write: the catch-up starts
  ASSERT_TRUE(caught_up());
  EXPECT_EQ(daemon_.replica[kPage], 2) << "the copy in flight undid the application's write";
  for (proto::MsgType t : daemon_.messages())
    EXPECT_NE(t, proto::MsgType::kChecksum) << "checksums asked of a target of 1.9";
}

TEST_F(RunAhead, ACloseBehindKeepsTheRecordAndTheNextOpenCatchesUpFromItsFirstWrite) {
  ASSERT_EQ(create(), 0) << msg();
  ASSERT_EQ(write(0, kSize, 1), 0);
  lose();
  ASSERT_EQ(write(5 * kPage, kPage, 2), 0);
  const auto start = Clock::now();
  EXPECT_EQ(pool_->close(), 0) << msg();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
  pool_.reset();
  auto rec = record().load();
  ASSERT_TRUE(rec) << "no record after a close behind";
  EXPECT_TRUE(rec->saved);
  EXPECT_EQ(daemon_.replica[5 * kPage], 1);
  // The next process: its memory is not the pool yet.
  daemon_.down(false);
  std::vector<uint8_t> pool_bytes(local_, local_ + kSize);
  std::memset(local_, 0, kSize);
  settings_.run_ahead = false;  // the record is enough
  ASSERT_EQ(connect(false), 0) << msg();
  EXPECT_EQ(pool_->state(), PoolState::kBehind);
  const auto reqs = daemon_.requests();
  EXPECT_TRUE(reqs.back().reopen && (reqs.back().ahead_flags & proto::kRunAhead));
  EXPECT_EQ(reqs.back().token, rec->token);
  char buf[4];
  EXPECT_EQ(pool_->read(buf, 0, 4, 0), ESTALE) << "a replica behind is no source";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(daemon_.replica[0], 1) << "zeros of a memory that is not the pool yet were sent";
  EXPECT_EQ(pool_->state(), PoolState::kBehind);
  // The application loads its pool and writes: the catch-up starts.
  std::memcpy(local_, pool_bytes.data(), kSize);
  ASSERT_EQ(write(9 * kPage, 1, 3), 0);
  ASSERT_TRUE(caught_up());
  EXPECT_TRUE(replica_matches());
  EXPECT_EQ(daemon_.replica[5 * kPage], 2);
  EXPECT_FALSE(record().load());
  EXPECT_EQ(pool_->close(), 0);
  pool_.reset();
  EXPECT_FALSE(std::filesystem::exists(record().map_path()))
      << "a closed pool in sync left its map";
}

TEST_F(RunAhead, AMapAPowerCutMayHaveCutShortSendsTheWholePool) {
  ASSERT_EQ(create(), 0) << msg();
  lose();
  ASSERT_EQ(write(5 * kPage, kPage, 2), 0);
  pool_.reset();  // the process ends without a close
  auto rec = record().load();
  ASSERT_TRUE(rec);
  rec->boot_id = "another boot";
  ASSERT_FALSE(record().save(*rec));
  daemon_.down(false);
  const size_t first_new = connector_.lanes().size();
  ASSERT_EQ(connect(false), 0) << msg();
  ASSERT_EQ(write(6 * kPage, 1, 3), 0);
  ASSERT_TRUE(caught_up());
  EXPECT_EQ(written_from(first_new), kSize) << "an untrusted map was trusted";
  EXPECT_TRUE(replica_matches());
}

TEST_F(RunAhead, ATokenTheTargetNoLongerKnowsOpensAnewAndSendsTheWholePool) {
  ASSERT_EQ(create(), 0) << msg();
  lose();
  ASSERT_EQ(write(5 * kPage, kPage, 2), 0);
  daemon_.answer_next(proto::Status::kStale);
  daemon_.down(false);
  ASSERT_TRUE(caught_up());
  const auto reqs = daemon_.requests();
  ASSERT_GE(reqs.size(), 3u);
  EXPECT_TRUE(reqs[reqs.size() - 2].reopen);
  EXPECT_FALSE(reqs.back().reopen);
  EXPECT_TRUE(reqs.back().ahead_flags & proto::kOpenBehind) << "it is this client's to overwrite";
  EXPECT_TRUE(replica_matches());
}

TEST_F(RunAhead, ATargetThatCannotMarkThePoolBehindLosesItAsBefore) {
  daemon_.minor(proto::kMinorRunAhead - 1);
  ASSERT_EQ(create(), 0) << msg();
  EXPECT_FALSE(daemon_.requests().back().ahead);
  lose();
  EXPECT_EQ(write(0, 10, 1), ECONNRESET);
  EXPECT_EQ(pool_->state(), PoolState::kLost);
  EXPECT_FALSE(record().load());
}

TEST_F(RunAhead, ARecordThatCannotBeWrittenLosesThePool) {
  ASSERT_EQ(create(), 0) << msg();
  std::filesystem::remove_all(settings_.state_dir);
  std::ofstream(settings_.state_dir) << "a file where the directory was";
  lose();
  EXPECT_EQ(write(0, 10, 1), ECONNRESET);
  EXPECT_EQ(pool_->state(), PoolState::kLost);
}

TEST_F(RunAhead, AClosedPoolInSyncLeavesNoRecord) {
  ASSERT_EQ(create(), 0) << msg();
  ASSERT_EQ(write(0, 10, 1), 0);
  EXPECT_TRUE(std::filesystem::exists(record().map_path()));
  EXPECT_EQ(pool_->close(), 0);
  pool_.reset();
  EXPECT_FALSE(std::filesystem::exists(record().map_path()));
  EXPECT_FALSE(record().load());
}

}  // namespace
}  // namespace rpmem::test
