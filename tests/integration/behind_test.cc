// SPDX-License-Identifier: BSD-3-Clause
// rpmemd's side of a pool whose client may run ahead of it (protocol 1.10),
// with raw control channels: a session that could run ahead and ended
// without a close leaves the pool marked behind its master, durably; any
// other open is refused (kBehind to a client of 1.10, kBusy to an older
// one) and logged, but the session's own reopen (its token) and the
// opener's override (logged); a close in sync clears the mark. The
// checksums a catch-up asks for are those of the pool's bytes, and a
// request outside the pool is refused.
#include "common/page_sum.h"
#include "tests/integration/harness.h"
#include "tests/integration/raw_peer.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;

class Behind : public ::testing::Test {
 protected:
  void SetUp() override { target_.write_poolset("p.set", {{kPool, "p.part0"}}, "OPTION NOHDRS\n"); }
  // A request of this client (minor 10), with the run-ahead flags `ahead`.
  static proto::PoolRequest request(uint32_t ahead) {
    proto::PoolRequest r = pool_request("p.set", kPool, 1, false);
    r.extended = r.leveled = true;
    r.ahead = ahead != 0;
    r.ahead_flags = ahead;
    return r;
  }
  // The reopen of the session `first` answered, with its token.
  static proto::PoolRequest own_reopen(const proto::PoolResponse &first) {
    proto::PoolRequest own = request(proto::kRunAhead);
    own.reopen = true;
    std::copy(first.token.begin(), first.token.end(), own.token.begin());
    return own;
  }
  // `req` of `type` in a session of its own, which then ends with a close
  // request (`close`), or without (its control channel closed).
  std::optional<proto::PoolResponse> session(proto::MsgType type, const proto::PoolRequest &req,
                                             bool close) {
    RawDaemon d(target_);
    if (!d.read_hello()) return std::nullopt;
    auto resp = d.request(type, req);
    if (close && resp && resp->status == proto::Status::kSuccess) {
      d.send(proto::encode(proto::CloseRequest{0}));
      proto::Bytes p;
      d.read_frame(p);
    }
    d.shutdown_write();
    d.wait();
    return resp;
  }
  Target target_;
};

TEST_F(Behind, ASessionThatCouldRunAheadAndEndedWithoutACloseKeepsOthersOff) {
  auto first = session(proto::MsgType::kCreate, request(proto::kRunAhead), false);
  ASSERT_TRUE(first && first->status == proto::Status::kSuccess);
  ASSERT_EQ(first->token.size(), proto::kTokenSize) << "ssh mode gives a session that may run "
                                                       "ahead a token";
  EXPECT_TRUE(target_.log_shows("may be behind its master from now on"));
  // Another client of 1.10, and one of 1.9 (which knows no kBehind).
  auto other = session(proto::MsgType::kOpen, request(0), true);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, proto::Status::kBehind);
  EXPECT_TRUE(target_.log_shows("cannot open pool set 'p.set': it may be behind its master"));
  proto::PoolRequest older = pool_request("p.set", kPool, 1, false);
  older.minor = proto::kMinorRunAhead - 1;
  older.extended = older.leveled = true;
  auto old = session(proto::MsgType::kOpen, older, true);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, proto::Status::kBusy);
  // librpmem without a record: ESTALE and the status's words.
  LocalPool local(kPool);
  unsigned nl = 1;
  EXPECT_EQ(rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr), nullptr);
  EXPECT_EQ(errno, ESTALE);
  EXPECT_STREQ(rpmem_errormsg(), "Pool may be behind its master");
  // Its own session comes back with the token, and closes in sync.
  auto back = session(proto::MsgType::kOpen, own_reopen(*first), true);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, proto::Status::kSuccess);
  // The mark is gone with that close.
  RPMEMpool *rpp = rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Behind, TheOpenersOverrideOpensAMarkedPoolAndIsLogged) {
  auto first = session(proto::MsgType::kCreate, request(proto::kRunAhead), false);
  ASSERT_TRUE(first && first->status == proto::Status::kSuccess);
  LocalPool local(kPool);
  unsigned nl = 1;
  set_env("RPMEM_OPEN_BEHIND", "1");
  RPMEMpool *rpp = rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ::unsetenv("RPMEM_OPEN_BEHIND");
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_TRUE(
      target_.log_shows("opened though it may be behind its master (the opener's override"));
  EXPECT_EQ(rpmem_read(rpp, local.data(), 0, 4096, 0), 0) << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(rpp), 0);
  // The override took the pool: the run-ahead session's token is stale now.
  auto back = session(proto::MsgType::kOpen, own_reopen(*first), false);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, proto::Status::kStale);
}

TEST_F(Behind, ChecksumsAreThoseOfThePoolsPagesAndARequestOutsideItIsRefused) {
  LocalPool local(kPool, 4);
  unsigned nl = 1;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  ASSERT_EQ(rpmem_persist(rpp, 0, kPool, 0, 0), 0);
  ASSERT_EQ(rpmem_close(rpp), 0);
  RawDaemon d(target_);
  ASSERT_TRUE(d.read_hello());
  auto resp = d.request(proto::MsgType::kOpen, request(0));
  ASSERT_TRUE(resp && resp->status == proto::Status::kSuccess);
  const uint64_t last = kPool / 4096 - 1;
  proto::ChecksumRequest req;
  req.ranges = {{0, 2}, {last, 1}};
  ASSERT_TRUE(d.send(proto::encode(req)));
  proto::Bytes p;
  auto h = d.read_frame(p);
  ASSERT_TRUE(h && h->type == proto::MsgType::kChecksumResp);
  auto sums = proto::decode_checksum_response(p);
  ASSERT_TRUE(sums && sums->status == proto::Status::kSuccess);
  ASSERT_EQ(sums->sums.size(), 3u);
  EXPECT_EQ(sums->sums[0], rpmem::page_sum(local.data(), 4096));
  EXPECT_EQ(sums->sums[1], rpmem::page_sum(local.data() + 4096, 4096));
  EXPECT_EQ(sums->sums[2], rpmem::page_sum(local.data() + last * 4096, 4096));
  req.ranges = {{last, 2}};  // one page past the end
  ASSERT_TRUE(d.send(proto::encode(req)));
  h = d.read_frame(p);
  ASSERT_TRUE(h && h->type == proto::MsgType::kChecksumResp);
  sums = proto::decode_checksum_response(p);
  ASSERT_TRUE(sums);
  EXPECT_EQ(sums->status, proto::Status::kBadSize);
  EXPECT_TRUE(sums->sums.empty());
  EXPECT_TRUE(target_.log_shows("checksum request outside the pool"));
  // A report is taken (no answer) and logged.
  ASSERT_TRUE(
      d.send(proto::encode(proto::PoolStateReport{proto::PoolSync::kResyncing, 8192, 0, 5})));
  EXPECT_TRUE(target_.log_shows("the client reports pool set 'p.set' catching up"));
  d.send(proto::encode(proto::CloseRequest{0}));
  ASSERT_TRUE(d.read_frame(p));
}

}  // namespace
}  // namespace rpmem_test
