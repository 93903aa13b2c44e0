// SPDX-License-Identifier: BSD-3-Clause
// rpmemd: the target daemon. Parses its options, then runs the Daemon.
#include "common/error.h"
#include "common/log.h"
#include "rpmemd/config.h"
#include "rpmemd/daemon.h"
#include "rpmemd/status_server.h"

#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace {

// One log line per line of `text` (a config error is the message, then the
// offending line): a log line never holds a newline.
void log_error_lines(std::string_view text) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    RPMEM_LOG_ERR("%.*s", static_cast<int>(line.size()), line.data());
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// The soft descriptor limit up to the hard one: lanes, sessions and
// connections are bounded by rpmemd's own caps, not by a soft limit of 1024
// meant for select(2) users.
void raise_nofile_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// rpmemd status [--json | --metrics] [--socket PATH]: asks a running
// service (its status socket) and prints the answer.
int status_main(int argc, char *argv[]) {
  std::string path = "/run/rpmemd/status.sock";
  std::string request = "status";
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--json") {
      request = "status json";
    } else if (a == "--metrics") {
      request = "metrics";
    } else if (a == "--socket" && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s status [--json | --metrics] [--socket PATH]\n", argv[0]);
      return 2;
    }
  }
  return rpmemd::status_command(path, request);
}

}  // namespace

int main(int argc, char *argv[]) {
  ::signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && std::strcmp(argv[1], "status") == 0) return status_main(argc, argv);
  raise_nofile_limit();
  rpmem::log::configure(rpmem::log::Level::kErr, rpmem::log::Sink::kStderr, {}, "rpmemd");
  rpmemd::Config config;
  try {
    rpmemd::parse_config(argc, argv, rpmemd::ConfigEnv::from_process(), config);
    if (config.help) {
      std::fprintf(stderr, "%s\n", rpmemd::usage_text(argv[0]).c_str());
      return 0;
    }
    if (config.version) {
      std::fprintf(stderr, "%s\n", rpmemd::version_text().c_str());
      return 0;
    }
    return rpmemd::Daemon(config).run();
  } catch (const rpmem::SetupError &e) {
    log_error_lines(e.what());
    // Under ssh the client reports this errno; a service has no client yet.
    if (!config.service) rpmemd::send_hello(e.code().value());
    return 1;
  } catch (const std::exception &e) {
    log_error_lines(e.what());
    if (!config.service) rpmemd::send_hello(EREMOTEIO);
    return 1;
  }
}
