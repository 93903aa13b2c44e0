// SPDX-License-Identifier: BSD-3-Clause
// Tests of the bounded socket I/O helpers over AF_UNIX socketpairs: whole
// gathered sends through partial writes, whole receives, timeouts, EOF.
#include "common/transport/tcp/socket_io.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace rpmem::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

std::error_code errc_of(int e) { return {e, std::generic_category()}; }

class SocketPair : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    int small = 4096;  // forces partial writes of anything larger
    ::setsockopt(fds_[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    ::setsockopt(fds_[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    ASSERT_FALSE(set_nonblocking(fds_[0], true));
    ASSERT_FALSE(set_nonblocking(fds_[1], true));
  }
  void TearDown() override {
    close_end(0);
    close_end(1);
  }
  void close_end(int i) {
    if (fds_[i] >= 0) ::close(fds_[i]);
    fds_[i] = -1;
  }
  int a() const { return fds_[0]; }
  int b() const { return fds_[1]; }

  int fds_[2] = {-1, -1};
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

TEST_F(SocketPair, SendAllDeliversGatheredIovecsThroughPartialWrites) {
  auto p1 = pattern(3, 1), p2 = pattern(200000, 2), p3 = pattern(0, 3), p4 = pattern(70001, 4);
  std::vector<uint8_t> expected;
  for (auto *p : {&p1, &p2, &p3, &p4}) expected.insert(expected.end(), p->begin(), p->end());

  std::vector<uint8_t> got(expected.size());
  std::error_code rerr;
  std::thread reader([&] {
    // Read in small slices so the sender keeps finding a full buffer.
    size_t at = 0;
    while (at < got.size() && !rerr) {
      size_t n = std::min<size_t>(1000, got.size() - at);
      rerr = recv_all(b(), got.data() + at, n, 5000);
      at += n;
    }
  });
  iovec iov[4] = {{p1.data(), p1.size()},
                  {p2.data(), p2.size()},
                  {p3.data(), p3.size()},
                  {p4.data(), p4.size()}};
  EXPECT_FALSE(send_all(a(), iov, 4, 5000));
  reader.join();
  EXPECT_FALSE(rerr);
  EXPECT_EQ(got, expected);
}

TEST_F(SocketPair, SendAllOfNothingSucceeds) {
  iovec iov[2] = {{nullptr, 0}, {nullptr, 0}};
  EXPECT_FALSE(send_all(a(), iov, 2, 100));
  EXPECT_FALSE(send_all(a(), iov, 0, 100));
  EXPECT_FALSE(send_all(a(), nullptr, 0, 100));
}

TEST_F(SocketPair, RecvAllCollectsBytesArrivingInPieces) {
  auto data = pattern(1001, 9);
  std::thread writer([&] {
    for (size_t at = 0; at < data.size(); at += 97) {
      size_t n = std::min<size_t>(97, data.size() - at);
      ASSERT_FALSE(send_all(a(), data.data() + at, n, 5000));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<uint8_t> got(data.size());
  EXPECT_FALSE(recv_all(b(), got.data(), got.size(), 5000));
  writer.join();
  EXPECT_EQ(got, data);
}

TEST_F(SocketPair, RecvSomeReportsHowManyBytesArrived) {
  const uint8_t msg[5] = {1, 2, 3, 4, 5};
  ASSERT_FALSE(send_all(a(), msg, sizeof(msg), 1000));
  uint8_t buf[64];
  size_t got = 0;
  ASSERT_FALSE(recv_some(b(), buf, sizeof(buf), got, 1000));
  ASSERT_EQ(got, 5u);
  EXPECT_EQ(0, std::memcmp(buf, msg, 5));
}

TEST_F(SocketPair, RecvAllTimesOutWithEtimedout) {
  uint8_t buf[8] = {};
  ASSERT_FALSE(send_all(a(), buf, 3, 1000));  // fewer bytes than asked for
  auto t0 = Clock::now();
  EXPECT_EQ(recv_all(b(), buf, sizeof(buf), 50), errc_of(ETIMEDOUT));
  auto took = Clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(40));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST_F(SocketPair, RecvSomeWithZeroTimeoutFailsAtOnceWhenNothingIsThere) {
  uint8_t buf[8];
  size_t got = 0;
  EXPECT_EQ(recv_some(b(), buf, sizeof(buf), got, 0), errc_of(ETIMEDOUT));
}

TEST_F(SocketPair, SendAllTimesOutWhenPeerDoesNotRead) {
  std::vector<uint8_t> big(8 << 20);
  auto t0 = Clock::now();
  EXPECT_EQ(send_all(a(), big.data(), big.size(), 50), errc_of(ETIMEDOUT));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
}

TEST_F(SocketPair, RecvAllOnClosedPeerIsEconnreset) {
  close_end(0);
  uint8_t buf[4];
  EXPECT_EQ(recv_all(b(), buf, sizeof(buf), 1000), errc_of(ECONNRESET));
}

TEST_F(SocketPair, RecvAllWhenPeerClosesMidMessageIsEconnreset) {
  const uint8_t part[3] = {1, 2, 3};
  ASSERT_FALSE(send_all(a(), part, sizeof(part), 1000));
  close_end(0);
  uint8_t buf[8];
  EXPECT_EQ(recv_all(b(), buf, sizeof(buf), 1000), errc_of(ECONNRESET));
}

TEST_F(SocketPair, RecvAllUnblocksWithEconnresetWhenPeerClosesWhileWaiting) {
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::shutdown(a(), SHUT_RDWR);
  });
  uint8_t buf[8];
  auto t0 = Clock::now();
  EXPECT_EQ(recv_all(b(), buf, sizeof(buf), kWaitForever), errc_of(ECONNRESET));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  closer.join();
}

TEST_F(SocketPair, SendAllToClosedPeerIsEconnresetWithoutSigpipe) {
  close_end(1);
  const uint8_t msg[16] = {};
  EXPECT_EQ(send_all(a(), msg, sizeof(msg), 1000), errc_of(ECONNRESET));  // EPIPE mapped
}

TEST_F(SocketPair, WaitReadableTimesOutThenSeesData) {
  EXPECT_EQ(wait_readable(b(), 10), errc_of(ETIMEDOUT));
  const uint8_t one = 1;
  ASSERT_FALSE(send_all(a(), &one, 1, 1000));
  EXPECT_FALSE(wait_readable(b(), 1000));
}

TEST_F(SocketPair, WaitReadableReturnsOnHangup) {
  close_end(0);
  EXPECT_FALSE(wait_readable(b(), 1000));
}

TEST_F(SocketPair, NapEndsWhenDataArrivesOrItsTimeHasPassed) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  // Nothing comes: the nap lasts its time, and not much longer (a timer
  // without the thread's 50 us of slack; a loaded machine may add more).
  auto t0 = Clock::now();
  EXPECT_FALSE(nap_until_readable(b(), microseconds(3000)));
  auto slept = Clock::now() - t0;
  EXPECT_GE(slept, microseconds(3000));
  EXPECT_LT(slept, milliseconds(500));
  // The thread's own timer slack is as it was.
  EXPECT_EQ(::prctl(PR_SET_TIMERSLACK, 70000UL, 0, 0, 0), 0);
  nap_until_readable(b(), microseconds(100));
  EXPECT_EQ(::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 70000);
  ::prctl(PR_SET_TIMERSLACK, 0UL, 0, 0, 0);  // the default again
  // Data comes first: the nap ends then, long before its time.
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_EQ(::send(a(), "x", 1, MSG_NOSIGNAL), 1);
  });
  t0 = Clock::now();
  EXPECT_TRUE(nap_until_readable(b(), std::chrono::seconds(5)));
  slept = Clock::now() - t0;
  writer.join();
  EXPECT_GE(slept, milliseconds(15));
  EXPECT_LT(slept, std::chrono::seconds(4));
  char c = 0;
  EXPECT_EQ(::recv(b(), &c, 1, MSG_DONTWAIT), 1) << "the nap takes nothing";
}

TEST_F(SocketPair, SetNonblockingTogglesTheFlag) {
  EXPECT_NE(::fcntl(a(), F_GETFL) & O_NONBLOCK, 0);
  ASSERT_FALSE(set_nonblocking(a(), false));
  EXPECT_EQ(::fcntl(a(), F_GETFL) & O_NONBLOCK, 0);
  ASSERT_FALSE(set_nonblocking(a(), true));
  EXPECT_NE(::fcntl(a(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(SocketIo, OperationsOnBadDescriptorReturnEbadf) {
  uint8_t buf[4] = {};
  EXPECT_EQ(send_all(-1, buf, sizeof(buf), 100), errc_of(EBADF));
  EXPECT_EQ(recv_all(-1, buf, sizeof(buf), 100), errc_of(EBADF));
  EXPECT_EQ(set_nonblocking(-1, true), errc_of(EBADF));
}

}  // namespace
}  // namespace rpmem::transport::tcp
