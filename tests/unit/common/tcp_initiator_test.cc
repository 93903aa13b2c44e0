// SPDX-License-Identifier: BSD-3-Clause
// Tests of the tcp client lane above its stream: how it waits for the
// rest of a read reply that comes frame by frame over an encrypted lane.
#include "common/transport/tcp/tcp_initiator.h"

#include "common/proto.h"

#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
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

}  // namespace
}  // namespace rpmem::transport::tcp
