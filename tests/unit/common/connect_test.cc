// SPDX-License-Identifier: BSD-3-Clause
// Tests of the racing connect against a real loopback listener whose
// accept queue is full, so that the kernel drops the SYNs that come.
#include "common/transport/tcp/connect.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace rpmem::transport::tcp {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int open_fds() {
  int n = 0;
  if (DIR *d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

// A listener on 127.0.0.1 with a queue of one connection, and that one
// connection in it: the next SYN is dropped until drain() accepts it.
class FullQueue : public ::testing::Test {
 protected:
  void SetUp() override {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    ASSERT_EQ(::listen(listener_, 0), 0);
    socklen_t len = sizeof(a);
    ASSERT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr *>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    filler_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(filler_, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    tcp::resolver resolver(io_);
    endpoints_ =
        resolver.resolve("127.0.0.1", std::to_string(port_), tcp::resolver::numeric_service);
  }
  void TearDown() override {
    if (drainer_.joinable()) drainer_.join();
    ::close(filler_);
    ::close(listener_);
  }
  // Accepts (and closes) the queued connection after `after`.
  void drain(milliseconds after) {
    drainer_ = std::thread([this, after] {
      std::this_thread::sleep_for(after);
      int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) ::close(fd);
    });
  }

  asio::io_context io_;
  int listener_ = -1;
  int filler_ = -1;
  uint16_t port_ = 0;
  tcp::resolver::results_type endpoints_;
  std::thread drainer_;
};

TEST_F(FullQueue, ADroppedSynCostsOneRetryNotTheKernelsSecond) {
  drain(milliseconds(300));
  ConnectTries tries;
  tries.first_retry = milliseconds(100);  // tries at 0, 100, 300, 700 ms
  tcp::socket sock(io_);
  const auto t0 = Clock::now();
  const auto ec = connect_racing(io_, sock, endpoints_, milliseconds(5000), tries);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(sock.is_open());
  EXPECT_GE(tries.winner, 1) << "the first SYN was dropped: a later try connects";
  EXPECT_LT(took, milliseconds(950)) << "before the kernel sends the first SYN again";
}

// The same queue with one try only: the dropped SYN comes again after the
// kernel's second, which is what the race saves.
TEST_F(FullQueue, OneTryWaitsForTheKernelsRetransmission) {
  drain(milliseconds(300));
  ConnectTries tries;
  tries.max = 1;
  tcp::socket sock(io_);
  const auto t0 = Clock::now();
  const auto ec = connect_racing(io_, sock, endpoints_, milliseconds(5000), tries);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(tries.started, 1u);
  EXPECT_EQ(tries.winner, 0);
  EXPECT_GE(took, milliseconds(900));
}

TEST_F(FullQueue, NoAnswerIsATimeoutAndLeavesNoDescriptorBehind) {
  {
    tcp::socket warm(io_);  // the io_context's own descriptors come with its first socket
    warm.open(tcp::v4());
  }
  const int before = open_fds();
  ConnectTries tries;
  tries.first_retry = milliseconds(50);
  tries.max = 3;
  tcp::socket sock(io_);
  const auto ec = connect_racing(io_, sock, endpoints_, milliseconds(400), tries);
  EXPECT_EQ(ec, asio::error::timed_out);
  EXPECT_EQ(tries.started, 3u) << "at most max sockets";
  EXPECT_EQ(tries.winner, -1);
  EXPECT_FALSE(sock.is_open());
  EXPECT_EQ(open_fds(), before);
}

TEST(ConnectRacing, ARefusalEndsEveryTryAtOnce) {
  asio::io_context io;
  tcp::acceptor closed(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const auto port = closed.local_endpoint().port();
  closed.close();
  tcp::resolver resolver(io);
  auto endpoints =
      resolver.resolve("127.0.0.1", std::to_string(port), tcp::resolver::numeric_service);
  ConnectTries tries;
  tcp::socket sock(io);
  const auto t0 = Clock::now();
  const auto ec = connect_racing(io, sock, endpoints, milliseconds(5000), tries);
  EXPECT_EQ(ec, asio::error::connection_refused) << ec.message();
  EXPECT_EQ(tries.started, 1u);
  EXPECT_LT(Clock::now() - t0, milliseconds(150));
}

}  // namespace
}  // namespace rpmem::transport::tcp
