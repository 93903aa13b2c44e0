// SPDX-License-Identifier: BSD-3-Clause
// What rpmemd's service says to systemd and takes from it: notifications
// (READY=1, STATUS=, WATCHDOG=1, STOPPING=1) that never wait, the socket of
// socket activation, and the unit's watchdog interval. Without libsystemd
// (RPMEM_HAVE_SYSTEMD unset) there is no activation and no watchdog;
// notifications still go to $NOTIFY_SOCKET.
#ifndef RPMEMD_SYSTEMD_NOTIFY_H
#define RPMEMD_SYSTEMD_NOTIFY_H

#include <cstdint>

namespace rpmemd::systemd {

// A message to systemd's notification socket ($NOTIFY_SOCKET), as
// sd_notify() sends it but without ever waiting: a datagram socket whose
// reader lags (a full queue, max_dgram_qlen) would block sd_notify, and
// with it the event loop. A message that cannot go now is dropped.
void notify(const char *state);

// The first socket systemd passed (socket activation), or -1.
int activated_socket() noexcept;

// WatchdogSec= of the unit in microseconds; 0: none.
uint64_t watchdog_usec() noexcept;

}  // namespace rpmemd::systemd

#endif  // RPMEMD_SYSTEMD_NOTIFY_H
