// SPDX-License-Identifier: BSD-3-Clause
// Tests of the tcp client lane above its stream: how it waits for the
// rest of a read reply that comes frame by frame over an encrypted lane;
// and, over a socket pair whose other end the test answers as a target
// would, its probes when a reply is late (reply_probe.h).
#include "common/transport/tcp/tcp_initiator.h"

#include "common/proto.h"
#include "common/transport/tcp/socket_io.h"

#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

namespace rpmem::transport::tcp {
namespace {

using Bytes = std::vector<uint8_t>;

// An encrypted stream as the client sees it: each piece of a reply comes
// after `gap` receives that find nothing (the target sealing the next
// frame). Its descriptor is always ready, so that a client that waits on
// it goes on at once; fd() counts those waits.
class FramesStream final : public ByteStream {
 public:
  FramesStream(std::deque<Bytes> pieces, unsigned gap,
               std::chrono::microseconds pause = std::chrono::microseconds(0))
      : pieces_(std::move(pieces)),
        gap_(gap),
        pause_(pause),
        fd_(::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~FramesStream() override { ::close(fd_); }

  int fd() const noexcept override {
    ++waits_;
    return fd_;
  }
  std::error_code recv_nowait(void *buf, size_t len, size_t &got) noexcept override {
    got = 0;
    if (pieces_.empty()) return {};
    if (empty_ < gap_) {
      ++empty_;
      return {};
    }
    // Slow pieces until the client waits on fd(), then the rest at once.
    if (pause_.count() > 0 && waits_ == 0) std::this_thread::sleep_for(pause_);
    Bytes &piece = pieces_.front();
    got = std::min(len, piece.size());
    std::memcpy(buf, piece.data(), got);
    piece.erase(piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(got));
    if (piece.empty()) {
      pieces_.pop_front();
      empty_ = 0;
    }
    return {};
  }
  std::error_code send_nowait(iovec *&, int &n) noexcept override {
    n = 0;  // the request: taken whole
    return {};
  }
  unsigned waits() const noexcept { return waits_; }
  int raw_fd() const noexcept { return fd_; }  // not counted

 private:
  std::deque<Bytes> pieces_;
  const unsigned gap_;
  const std::chrono::microseconds pause_;
  unsigned empty_ = 0;
  const int fd_;
  mutable unsigned waits_ = 0;
};

TEST(TcpInitiatorLane, AnEncryptedReadReplyIsWaitedForFrameByFrameWithoutSleeping) {
  constexpr size_t kFrame = 1000, kFrames = 8;
  Bytes want(kFrame * kFrames);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(i * 13 + 7);
  uint8_t header[proto::kDataReplySize];
  proto::encode(proto::DataReply{0, DataOp::kRead, want.size()}, header);
  // On a loaded machine a spin may run out before its frame comes (each
  // turn yields the CPU, which another process may keep for milliseconds)
  // and sleep: of twenty reads (a millisecond each), one must go without a
  // wait. The suite's first tests start beside its heaviest ones.
  unsigned fewest = ~0u;
  for (int attempt = 0; attempt < 20 && fewest > 0; ++attempt) {
    std::deque<Bytes> pieces{Bytes(header, header + sizeof(header))};
    for (size_t f = 0; f < kFrames; ++f)
      pieces.emplace_back(want.begin() + static_cast<std::ptrdiff_t>(f * kFrame),
                          want.begin() + static_cast<std::ptrdiff_t>((f + 1) * kFrame));
    auto stream = std::make_unique<FramesStream>(std::move(pieces), 3);
    FramesStream &s = *stream;
    TcpInitiatorLane lane(s.raw_fd(), nullptr, 1000, 2, std::move(stream));
    const unsigned before = s.waits();
    Bytes got(want.size());
    ASSERT_FALSE(lane.read(got.data(), 0, got.size()));
    EXPECT_EQ(got, want);
    fewest = std::min(fewest, s.waits() - before);
  }
  EXPECT_EQ(fewest, 0u) << "the client slept between the frames of a reply under way";
}

TEST(TcpInitiatorLane, ASpinForFramesLastsTheLanesTimeoutAtMost) {
  // A target that sends a one-byte frame each millisecond (200 would take
  // 200 ms): with a 20 ms timeout, the client spins for the first ones,
  // then sleeps (and the fake sends the rest at once).
  constexpr size_t kBytes = 200;
  Bytes want(kBytes);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(i * 7 + 1);
  uint8_t header[proto::kDataReplySize];
  proto::encode(proto::DataReply{0, DataOp::kRead, want.size()}, header);
  std::deque<Bytes> pieces{Bytes(header, header + sizeof(header))};
  for (uint8_t b : want) pieces.push_back({b});
  auto stream =
      std::make_unique<FramesStream>(std::move(pieces), 1, std::chrono::microseconds(1000));
  FramesStream &s = *stream;
  TcpInitiatorLane lane(s.raw_fd(), nullptr, 20, 2, std::move(stream));
  Bytes got(want.size());
  ASSERT_FALSE(lane.read(got.data(), 0, got.size()));
  EXPECT_EQ(got, want);
  EXPECT_GT(s.waits(), 0u) << "the client spun for a slow reply past the lane's timeout";
}

// The target's end of a socket pair under a lane: what it receives, and
// replies when the test says.
class LaneEnd {
 public:
  LaneEnd() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0) {
      client_ = fds[0];
      fd_ = fds[1];
      EXPECT_FALSE(set_nonblocking(fd_, true));  // for recv_all's timeout
    }
  }
  ~LaneEnd() { ::close(fd_); }
  LaneEnd(const LaneEnd &) = delete;
  LaneEnd &operator=(const LaneEnd &) = delete;

  int client_fd() const { return client_; }  // the lane owns it
  // The next request header, within `ms`; nullopt when none came.
  std::optional<proto::DataRequest> request(int ms) {
    uint8_t hdr[proto::kDataRequestSize];
    if (recv_all(fd_, hdr, sizeof(hdr), ms)) return std::nullopt;
    auto req = proto::decode_data_request(hdr);
    if (req && proto::carries_payload(req->op)) {
      Bytes payload(req->length);
      if (recv_all(fd_, payload.data(), payload.size(), ms)) return std::nullopt;
    }
    return req;
  }
  void reply(DataOp op) {
    uint8_t r[proto::kDataReplySize];
    proto::encode(proto::DataReply{0, op, 0}, r);
    EXPECT_FALSE(send_all(fd_, r, sizeof(r), 2000));
  }

 private:
  int client_ = -1, fd_ = -1;
};

using Clock = std::chrono::steady_clock;

// A reply that is late (lost, as far as the client can tell) gets a probe
// behind the request after kProbeFloor (a socket pair has no round trip to
// wait for), and once more twice as far into the wait; their replies, which
// come behind the request's, are skipped, in this wait and in the next.
TEST(TcpInitiatorLane, ALateReplyIsProbedAndTheProbesRepliesAreSkipped) {
  LaneEnd target;
  Bytes pool(8192, 7);
  TcpInitiatorLane lane(target.client_fd(), pool.data(), 5000, 2, nullptr, nullptr, 0, true);
  std::thread serve([&] {
    const auto req = target.request(2000);
    ASSERT_TRUE(req && req->op == DataOp::kPersist);
    for (int i = 0; i < 2; ++i) {
      const auto probe = target.request(2000);
      ASSERT_TRUE(probe) << "no probe " << i;
      EXPECT_EQ(probe->op, DataOp::kProbe);
    }
    target.reply(DataOp::kPersist);  // the reply, then one probe's
    target.reply(DataOp::kProbe);
    // The other probes' replies (a busy machine may have let the client
    // send a third) come before the next request's.
    unsigned owed = 1;
    auto next = target.request(2000);
    for (; next && next->op == DataOp::kProbe; next = target.request(2000)) ++owed;
    ASSERT_TRUE(next && next->op == DataOp::kDrain);
    for (unsigned i = 0; i < owed; ++i) target.reply(DataOp::kProbe);
    target.reply(DataOp::kDrain);
  });
  const auto t0 = Clock::now();
  EXPECT_EQ(lane.write(DataOp::kPersist, 4096, 64, 0), std::error_code{});
  // Answered only after the second probe, due twice the floor into the wait.
  EXPECT_GE(Clock::now() - t0, 2 * kProbeFloor) << "probed too early";
  EXPECT_EQ(lane.drain(0), std::error_code{});
  serve.join();
}

// Without the target's word (a daemon before protocol 1.11), a late reply
// is waited for, and nothing goes behind the request.
TEST(TcpInitiatorLane, ALaneThatMayNotProbeSendsNothingWhileItWaits) {
  LaneEnd target;
  Bytes pool(8192, 7);
  TcpInitiatorLane lane(target.client_fd(), pool.data(), 5000, 2);
  std::thread serve([&] {
    ASSERT_TRUE(target.request(2000));
    EXPECT_FALSE(target.request(30 * static_cast<int>(kProbeFloor.count())))
        << "a probe went to a target that does not answer them";
    target.reply(DataOp::kPersist);
  });
  EXPECT_EQ(lane.write(DataOp::kPersist, 4096, 64, 0), std::error_code{});
  serve.join();
}

// A reply to a probe the client did not send is a malformed reply.
TEST(TcpInitiatorLane, AProbesReplyNobodyAskedForIsMalformed) {
  LaneEnd target;
  Bytes pool(8192, 7);
  TcpInitiatorLane lane(target.client_fd(), pool.data(), 5000, 2, nullptr, nullptr, 0, true);
  std::thread serve([&] {
    ASSERT_TRUE(target.request(2000));
    target.reply(DataOp::kProbe);
  });
  EXPECT_EQ(lane.write(DataOp::kPersist, 4096, 64, 0), errc(EPROTO));
  serve.join();
}

// The rule itself (ProbeSchedule).
TEST(ProbeSchedule, TheFirstProbeComesAfterTheFloorAndTwoSmoothedRoundTrips) {
  const auto t0 = Clock::now();
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  ProbeSchedule s;
  s.start(t0);
  EXPECT_EQ(s.due(), t0 + kProbeFloor);
  EXPECT_FALSE(s.fire(t0 + milliseconds(1), microseconds(0))) << "before its time";
  EXPECT_FALSE(s.fire(t0 + kProbeFloor, milliseconds(10))) << "within two round trips of 10 ms";
  EXPECT_EQ(s.due(), t0 + milliseconds(20));
  EXPECT_TRUE(s.fire(t0 + milliseconds(20), milliseconds(10)));
  EXPECT_EQ(s.sent(), 1u);
  // The next wait's first probe is due where the last round trip said.
  const auto t1 = t0 + std::chrono::seconds(1);
  s.start(t1);
  EXPECT_EQ(s.due(), t1 + milliseconds(20));
  EXPECT_EQ(s.sent(), 0u);
  // A shorter round trip since: probed at once, and the floor from then on.
  EXPECT_TRUE(s.fire(t1 + milliseconds(20), microseconds(50)));
  s.start(t1);
  EXPECT_EQ(s.due(), t1 + kProbeFloor);
  EXPECT_TRUE(s.fire(t1 + kProbeFloor, microseconds(50)));
}

TEST(ProbeSchedule, EachNextProbeComesTwiceAsFarIntoTheWaitUntilItIsLong) {
  const auto t0 = Clock::now();
  ProbeSchedule s;
  s.start(t0);
  std::vector<long> at;  // ms into the wait
  for (int i = 0; i < 20 && s.due() != Clock::time_point::max(); ++i) {
    const auto now = s.due();
    ASSERT_TRUE(s.fire(now, std::chrono::microseconds(100)));
    at.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(now - t0).count());
  }
  EXPECT_EQ(at, (std::vector<long>{5, 10, 20, 40, 80, 160, 320, 640}));
  EXPECT_EQ(s.sent(), 8u);
  EXPECT_FALSE(s.fire(t0 + std::chrono::seconds(5), std::chrono::microseconds(100)));
}

}  // namespace
}  // namespace rpmem::transport::tcp
