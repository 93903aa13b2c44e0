// SPDX-License-Identifier: BSD-3-Clause
// Daemon: what rpmemd does once its configuration is known -- logging,
// the pool set directory, then either --remove or one session over
// stdin/stdout.
#ifndef RPMEMD_DAEMON_H
#define RPMEMD_DAEMON_H

#include "rpmemd/config.h"

namespace rpmemd {

class Daemon {
 public:
  explicit Daemon(Config config) : config_(std::move(config)) {}
  // Returns the process exit code. Throws rpmem::SetupError when the
  // configuration cannot be applied (main reports its errno to the client).
  int run();

 private:
  Config config_;
};

// Sends the first message of the control channel with `status` (an errno,
// 0 for OK) on stdout. Used by main when startup fails.
void send_hello(int status) noexcept;

// The data listen address from SSH_CONNECTION ("client port server port"):
// the third field; empty when the variable is missing or malformed.
std::string listen_address_from_ssh(const char *ssh_connection);

}  // namespace rpmemd

#endif  // RPMEMD_DAEMON_H
