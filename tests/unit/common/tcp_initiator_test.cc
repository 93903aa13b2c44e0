// SPDX-License-Identifier: BSD-3-Clause
// Tests of the tcp client lane above its stream: how it waits for the
// rest of a read reply that comes frame by frame over an encrypted lane.
#include "common/transport/tcp/tcp_initiator.h"

#include "common/proto.h"

#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
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
  FramesStream(std::deque<Bytes> pieces, unsigned gap)
      : pieces_(std::move(pieces)), gap_(gap), fd_(::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK)) {}
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

 private:
  std::deque<Bytes> pieces_;
  const unsigned gap_;
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
  // On a loaded machine one spin may run out before its frame comes and
  // sleep once: of three reads, one must go without a wait.
  unsigned fewest = ~0u;
  for (int attempt = 0; attempt < 3 && fewest > 0; ++attempt) {
    std::deque<Bytes> pieces{Bytes(header, header + sizeof(header))};
    for (size_t f = 0; f < kFrames; ++f)
      pieces.emplace_back(want.begin() + static_cast<std::ptrdiff_t>(f * kFrame),
                          want.begin() + static_cast<std::ptrdiff_t>((f + 1) * kFrame));
    auto stream = std::make_unique<FramesStream>(std::move(pieces), 3);
    FramesStream &s = *stream;
    TcpInitiatorLane lane(s.fd(), nullptr, 1000, 2, std::move(stream));
    const unsigned before = s.waits();
    Bytes got(want.size());
    ASSERT_FALSE(lane.read(got.data(), 0, got.size()));
    EXPECT_EQ(got, want);
    fewest = std::min(fewest, s.waits() - before);
  }
  EXPECT_EQ(fewest, 0u) << "the client slept between the frames of a reply under way";
}

}  // namespace
}  // namespace rpmem::transport::tcp
