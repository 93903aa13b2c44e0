// SPDX-License-Identifier: BSD-3-Clause
// rpmemd startup: logging, pool set directory, remove mode or a session.
#include "rpmemd/daemon.h"

#include "common/error.h"
#include "common/log.h"
#include "common/transport/transport.h"
#include "rpmemd/control_io.h"
#include "rpmemd/pool_store.h"
#include "rpmemd/service.h"
#include "rpmemd/session.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace rpmemd {

using rpmem::SetupError;

void send_hello(int status) noexcept {
  proto::Hello hello;
  hello.status = static_cast<uint32_t>(status);
  hello.transports = rpmem::transport::available_transports();
  ControlIo io(STDIN_FILENO, STDOUT_FILENO);
  io.write_all(proto::encode(hello));
}

std::string listen_address_from_ssh(const char *ssh_connection) {
  if (!ssh_connection) return {};
  std::istringstream in(ssh_connection);
  std::string client, client_port, server;
  if (!(in >> client >> client_port >> server)) return {};
  return server;
}

int Daemon::run() {
  namespace log = rpmem::log;
  if (config_.use_syslog) {
    log::configure(config_.log_level, log::Sink::kSyslog, {}, "rpmemd");
  } else if (config_.log_file == "-") {  // stderr: the journal under systemd
    log::configure(config_.log_level, log::Sink::kStderr, {}, "rpmemd");
  } else if (!log::configure(config_.log_level, log::Sink::kFile, config_.log_file, "rpmemd")) {
    throw SetupError(errno, "cannot open log file '" + config_.log_file + "'");
  }
  if (!is_absolute_dir(config_.poolset_dir))
    throw SetupError(EINVAL, "poolset-dir must be an absolute path: '" + config_.poolset_dir + "'");
  int dir = ::open(config_.poolset_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) throw SetupError(errno, "cannot open poolset-dir '" + config_.poolset_dir + "'");
  ::close(dir);
  if (const char *user = std::getenv("USER")) RPMEM_LOG_INFO("user: %s", user);
  RPMEM_LOG_INFO("pool set directory: %s", config_.poolset_dir.c_str());

  if (config_.service && !config_.remove) return Service(config_).run();

  PoolStore store(config_.poolset_dir);
  if (config_.remove) {
    auto ec = store.remove(*config_.remove, config_.force, config_.remove_poolset);
    if (ec) {
      RPMEM_LOG_ERR("removing '%s' failed: %s", config_.remove->c_str(), ec.message().c_str());
      std::fprintf(stderr, "rpmemd: removing '%s' failed: %s\n", config_.remove->c_str(),
                   ec.message().c_str());
      return ec.value() == kBadName ? EINVAL : ec.value();
    }
    return 0;
  }

  // SIGTERM/SIGINT arrive through a descriptor: blocked here, before any
  // thread starts, so every thread inherits the mask.
  const int sfd = termination_signal_fd();

  const char *ssh_conn = std::getenv("SSH_CONNECTION");
  SessionParams params;
  params.listen_address = listen_address_from_ssh(ssh_conn);
  params.transports = rpmem::transport::available_transports();
  params.persist_apm = config_.persist_apm;
  params.nthreads = config_.nthreads;
  params.max_lanes = config_.max_lanes;
  params.peer_timeout = config_.peer_timeout;
  // Lanes may come from another address than the ssh connection (a jump
  // host, a multihomed client): in ssh mode the session secret alone binds
  // them.
  if (params.listen_address.empty())
    RPMEM_LOG_WARN("SSH_CONNECTION not set: lanes are accepted on every address");
  else
    RPMEM_LOG_INFO("ssh connection: %s", ssh_conn);

  send_hello(0);
  ControlIo io(STDIN_FILENO, STDOUT_FILENO);
  Session session(store, io, params, sfd);
  SessionEnd end = session.run();
  if (sfd >= 0) ::close(sfd);
  switch (end) {
    case SessionEnd::kClosed:
    case SessionEnd::kRequestFailed:
    case SessionEnd::kSignal:
      return 0;
    case SessionEnd::kDisconnected:
      return 1;
    default:
      return 255;
  }
}

}  // namespace rpmemd
