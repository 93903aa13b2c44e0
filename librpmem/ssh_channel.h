// SPDX-License-Identifier: BSD-3-Clause
// SshChannel: the control channel to rpmemd, through a child process
// `$RPMEM_SSH [-p port] -T -oBatchMode=yes [user@]host "<cmd> <args>"`
// started with posix_spawn (no fork of the application). The child's
// stdin/stdout/stderr are socketpairs; the channel reaps the child itself.
//
// Thread-safety: one call at a time (the owner serialises).
#ifndef RPMEM_LIBRPMEM_SSH_CHANNEL_H
#define RPMEM_LIBRPMEM_SSH_CHANNEL_H

#include "common/error.h"
#include "common/proto.h"
#include "librpmem/control_channel.h"
#include "librpmem/settings.h"
#include "librpmem/target_address.h"

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace rpmem {

// Quotes one argument for a POSIX shell ('...' with embedded quotes escaped).
std::string shell_quote(const std::string &arg);

// The argv the library runs: ssh options, destination, and one command line
// made of `cmd` (run by the remote shell as it is) and the quoted `args`.
std::vector<std::string> ssh_argv(const Settings &settings, const TargetAddress &target,
                                  const std::string &cmd, const std::vector<std::string> &args);

class SshChannel final : public ControlChannel {
 public:
  // Starts the child. Errors: EINVAL (bad port), or the spawn's errno.
  static Result<std::unique_ptr<SshChannel>> spawn(const Settings &settings,
                                                   const TargetAddress &target,
                                                   const std::string &cmd,
                                                   const std::vector<std::string> &args);
  ~SshChannel() override;  // closes the sockets and reaps the child (bounded wait)
  SshChannel(const SshChannel &) = delete;
  SshChannel &operator=(const SshChannel &) = delete;

  // Sends one whole frame. ECONNRESET when the child is gone.
  std::error_code send(const proto::Bytes &frame,
                       std::chrono::milliseconds timeout) noexcept override;
  std::error_code recv(proto::MsgType expected, proto::Bytes &payload,
                       std::chrono::milliseconds timeout) noexcept override;
  // Waits for EOF on the child's stdout; EPROTO if any byte arrives.
  std::error_code wait_eof(std::chrono::milliseconds timeout) noexcept;

  // What the child wrote to stderr so far: the first line, without CR/LF.
  std::string stderr_line();
  std::string diagnostics() override { return stderr_line(); }
  void close(std::chrono::milliseconds timeout) noexcept override { close_and_wait(timeout); }
  int hangup_fd() const noexcept override { return out_; }
  // Closes stdin/stdout and reaps the child; returns its wait status, or -1
  // if it had to be killed after `timeout`.
  int close_and_wait(std::chrono::milliseconds timeout);

 private:
  SshChannel(pid_t pid, int in, int out, int err) : pid_(pid), in_(in), out_(out), err_(err) {}
  void drain_stderr();

  pid_t pid_;
  int in_, out_, err_;  // our ends of the child's stdin, stdout, stderr
  std::string stderr_;
  int status_ = -1;
  bool reaped_ = false;
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_SSH_CHANNEL_H
