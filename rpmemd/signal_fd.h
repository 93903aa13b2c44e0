// SPDX-License-Identifier: BSD-3-Clause
// blocked_signal_fd: signals taken through a descriptor (signalfd) rather
// than a handler, as rpmemd takes SIGTERM/SIGINT and SIGHUP.
#ifndef RPMEMD_SIGNAL_FD_H
#define RPMEMD_SIGNAL_FD_H

#include <initializer_list>

namespace rpmemd {

// Blocks `signals` in the calling thread, so that every thread started
// after it inherits the mask, and returns a signalfd (close-on-exec) that
// becomes readable when one of them arrives; -1 with errno set when there
// is none. Call it before any thread starts.
int blocked_signal_fd(std::initializer_list<int> signals) noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_SIGNAL_FD_H
