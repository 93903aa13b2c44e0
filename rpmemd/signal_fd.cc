// SPDX-License-Identifier: BSD-3-Clause
// blocked_signal_fd: a set of signals blocked and read through a signalfd.
#include "rpmemd/signal_fd.h"

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

namespace rpmemd {

int blocked_signal_fd(std::initializer_list<int> signals) noexcept {
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : signals) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return ::signalfd(-1, &sigs, SFD_CLOEXEC);
}

}  // namespace rpmemd
