// SPDX-License-Identifier: BSD-3-Clause
// Starting ssh and talking to rpmemd through it.
#include "librpmem/ssh_channel.h"

#include "common/log.h"
#include "common/transport/tcp/socket_io.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

extern char **environ;

namespace rpmem {

using transport::tcp::recv_all;
using transport::tcp::send_all;

std::string shell_quote(const std::string &arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::vector<std::string> ssh_argv(const Settings &settings, const TargetAddress &target,
                                  const std::string &cmd, const std::vector<std::string> &args) {
  std::vector<std::string> argv{settings.ssh};
  if (!target.port.empty()) {
    argv.emplace_back("-p");
    argv.push_back(target.port);
  }
  argv.emplace_back("-T");
  argv.emplace_back("-oBatchMode=yes");
  // The destination is never an option, whatever it looks like (parse_target
  // refuses a leading '-' too; this is the second line of defence).
  argv.emplace_back("--");
  argv.push_back(target.ssh_destination());
  std::string line = cmd;
  for (const auto &a : args) line += " " + shell_quote(a);
  argv.push_back(line);
  return argv;
}

Result<std::unique_ptr<SshChannel>> SshChannel::spawn(const Settings &settings,
                                                      const TargetAddress &target,
                                                      const std::string &cmd,
                                                      const std::vector<std::string> &args) {
  if (!target.port.empty()) {
    auto port = port_number(target.port);
    if (!port) return port.error();
  }
  int pairs[3][2];
  int made = 0;
  auto close_pairs = [&] {
    for (int i = 0; i < made; ++i) {
      ::close(pairs[i][0]);
      ::close(pairs[i][1]);
    }
  };
  for (; made < 3; ++made) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[made]) != 0) {
      int err = errno;
      close_pairs();
      return Error{errc(err), "cannot create the ssh channel"};
    }
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int i = 0; i < 3; ++i) posix_spawn_file_actions_adddup2(&fa, pairs[i][1], i);
  // The child gets default signal handling and mask, whatever the
  // application set up.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  auto args_str = ssh_argv(settings, target, cmd, args);
  std::vector<char *> argv;
  for (auto &a : args_str) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  for (auto &p : pairs) ::close(p[1]);
  if (rc != 0) {
    for (auto &p : pairs) ::close(p[0]);
    return Error{errc(rc), "cannot start '" + settings.ssh + "'"};
  }
  RPMEM_LOG_INFO("started pid %d: %s ... %s", static_cast<int>(pid), argv[0],
                 args_str.back().c_str());
  for (int i = 0; i < 3; ++i) transport::tcp::set_nonblocking(pairs[i][0], true);
  return std::unique_ptr<SshChannel>(new SshChannel(pid, pairs[0][0], pairs[1][0], pairs[2][0]));
}

SshChannel::~SshChannel() {
  close_and_wait(std::chrono::milliseconds(2000));
  if (err_ >= 0) ::close(err_);
}

std::error_code SshChannel::send(const proto::Bytes &frame,
                                 std::chrono::milliseconds timeout) noexcept {
  if (in_ < 0) return errc(ECONNRESET);
  return send_all(in_, frame.data(), frame.size(), static_cast<int>(timeout.count()));
}

std::error_code SshChannel::recv(proto::MsgType expected, proto::Bytes &payload,
                                 std::chrono::milliseconds timeout) noexcept {
  if (out_ < 0) return errc(ECONNRESET);
  const int ms = static_cast<int>(timeout.count());
  uint8_t hdr[proto::kFrameHeaderSize];
  if (auto ec = recv_all(out_, hdr, sizeof(hdr), ms)) return ec;
  auto h = proto::decode_frame_header(hdr);
  if (!h || h->type != expected) return errc(EPROTO);
  try {
    payload.resize(h->size);
  } catch (...) {
    return errc(ENOMEM);
  }
  return recv_all(out_, payload.data(), payload.size(), ms);
}

std::error_code SshChannel::wait_eof(std::chrono::milliseconds timeout) noexcept {
  uint8_t byte;
  auto ec = recv_all(out_, &byte, 1, static_cast<int>(timeout.count()));
  if (!ec) return errc(EPROTO);
  return ec == std::errc::connection_reset ? std::error_code{} : ec;
}

void SshChannel::drain_stderr() {
  if (err_ < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(err_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    if (stderr_.size() < 4095) stderr_.append(buf, std::min<size_t>(n, 4095 - stderr_.size()));
  }
}

std::string SshChannel::stderr_line() {
  drain_stderr();
  std::string line = stderr_.substr(0, stderr_.find_first_of("\r\n"));
  return line;
}

int SshChannel::close_and_wait(std::chrono::milliseconds timeout) {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  in_ = out_ = -1;
  if (reaped_) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    drain_stderr();  // a child blocked on a full stderr could not exit
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) {
      reaped_ = true;
      status_ = r == pid_ ? st : -1;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  RPMEM_LOG_WARN("pid %d did not exit; killing it", static_cast<int>(pid_));
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  status_ = -1;
  return status_;
}

}  // namespace rpmem
