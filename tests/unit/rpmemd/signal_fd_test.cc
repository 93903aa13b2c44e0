// SPDX-License-Identifier: BSD-3-Clause
// Tests of blocked_signal_fd: a blocked signal arrives through the
// descriptor instead of a handler.
#include "rpmemd/signal_fd.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

namespace rpmemd {
namespace {

TEST(BlockedSignalFd, ASignalRaisedAfterwardsIsReadFromTheDescriptor) {
  sigset_t before;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  const int fd = blocked_signal_fd({SIGUSR2});
  ASSERT_GE(fd, 0);
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  EXPECT_EQ(sigismember(&now, SIGUSR2), 1);

  ASSERT_EQ(::raise(SIGUSR2), 0);  // blocked: it waits on the descriptor
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  signalfd_siginfo info{};
  ASSERT_EQ(::read(fd, &info, sizeof(info)), static_cast<ssize_t>(sizeof(info)));
  EXPECT_EQ(info.ssi_signo, static_cast<uint32_t>(SIGUSR2));
  ::close(fd);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace
}  // namespace rpmemd
