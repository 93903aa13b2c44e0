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
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
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

namespace {

const char *str_or_null(const char *s) { return s ? s : "(null)"; }

// The configuration, as PMDK's rpmemd logged it at startup.
void log_configuration(const Config &config) {
  RPMEM_LOG_NOTICE("configuration");
  RPMEM_LOG_NOTICE("\tpool set directory: '%s'", config.poolset_dir.c_str());
  RPMEM_LOG_NOTICE("\tpersist method: %s", config.persist_apm
                                               ? "Appliance Persistency Method"
                                               : "General Purpose Server Persistency Method");
  RPMEM_LOG_NOTICE("\tnumber of threads: %u", config.nthreads);
  RPMEM_LOG_DEBUG("\tpersist APM: %s", config.persist_apm ? "yes" : "no");
  RPMEM_LOG_DEBUG("\tpersist GPSPM: %s", config.persist_general ? "yes" : "no");
  RPMEM_LOG_DEBUG("\tuse syslog: %s", config.use_syslog ? "yes" : "no");
  RPMEM_LOG_DEBUG("\tlog file: %s", config.use_syslog ? "(null)" : config.log_file.c_str());
  RPMEM_LOG_DEBUG("\tlog level: %s", rpmem::log::level_name(config.log_level));
}

// The log where the config sends it: syslog, stderr ("-") or a file.
void open_log(const Config &config) {
  namespace log = rpmem::log;
  if (config.use_syslog) {
    log::configure(config.log_level, log::Sink::kSyslog, {}, "rpmemd");
  } else if (config.log_file == "-") {  // stderr: the journal under systemd
    log::configure(config.log_level, log::Sink::kStderr, {}, "rpmemd");
  } else if (!log::configure(config.log_level, log::Sink::kFile, config.log_file, "rpmemd",
                             log::Prefix::kBare)) {
    const int err = errno;
    throw SetupError(err,
                     "cannot open log file -- '" + config.log_file + "': " + std::strerror(err));
  }
}

// The pool set directory is an absolute path to a directory we can open.
void check_poolset_dir(const Config &config) {
  if (!is_absolute_dir(config.poolset_dir))
    throw SetupError(EINVAL,
                     "root directory is not an absolute path -- '" + config.poolset_dir + "'");
  int dir = ::open(config.poolset_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    const int err = errno;
    throw SetupError(err, "cannot open pool set directory -- '" + config.poolset_dir +
                              "': " + std::strerror(err));
  }
  ::close(dir);
}

}  // namespace

int Daemon::run() {
  open_log(config_);
  RPMEM_LOG_INFO("%s", version_text().c_str());
  check_poolset_dir(config_);

  if (config_.service && !config_.remove) {
    log_configuration(config_);
    return Service(config_).run();
  }

  PoolStore store(config_.poolset_dir);
  if (config_.remove) {
    RPMEM_LOG_INFO("removing '%s'", config_.remove->c_str());
    auto ec = remove_pool(store, *config_.remove, config_.force, config_.remove_poolset);
    if (ec) {
      RPMEM_LOG_ERR("removing '%s' failed: %s", config_.remove->c_str(), ec.message().c_str());
      std::fprintf(stderr, "rpmemd: removing '%s' failed: %s\n", config_.remove->c_str(),
                   ec.message().c_str());
      return ec.value() == kBadName ? EINVAL : ec.value();
    }
    RPMEM_LOG_NOTICE("removed '%s'", config_.remove->c_str());
    return 0;
  }

  // SIGTERM/SIGINT arrive through a descriptor: blocked here, before any
  // thread starts, so every thread inherits the mask.
  const int sfd = termination_signal_fd();

  const char *ssh_conn = std::getenv("SSH_CONNECTION");
  SessionParams params = session_params(config_);
  params.target.listen_address = listen_address_from_ssh(ssh_conn);
  // peer_address stays empty: lanes may come from another address than the
  // ssh connection (a jump host, a multihomed client), and in ssh mode the
  // session secret alone binds them.

  send_hello(0);
  RPMEM_LOG_NOTICE("ssh connection: %s", str_or_null(ssh_conn));
  RPMEM_LOG_NOTICE("user: %s", str_or_null(std::getenv("USER")));
  log_configuration(config_);
  if (params.target.listen_address.empty())
    RPMEM_LOG_WARN("SSH_CONNECTION not set: lanes are accepted on every address");
  ControlIo io(STDIN_FILENO, STDOUT_FILENO);
  Session session(store, io, params, sfd);
  SessionEnd end = session.run();
  if (sfd >= 0) ::close(sfd);
  // What serving the pool cost this process at its peak (the tests of pools
  // far larger than the memory read it), at debug level: PMDK's log had no
  // such line.
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) == 0)
    RPMEM_LOG_DEBUG("peak resident memory: %ld KiB", ru.ru_maxrss);
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
