// SPDX-License-Identifier: BSD-3-Clause
// Settings: what the environment tells the library. Every variable is one
// row of kVariables (settings.cc): its name, how its value is read and
// bounded, its default and the words librpmem(7)'s ENVIRONMENT opens its
// entry with; tests/unit/librpmem/environment_doc_test.cc holds the man
// page and the table to each other. The logging variables are read once
// per process (init_logging_once), the others at each create, open and
// remove; all through secure_getenv (ignored in secure-execution mode).
#ifndef RPMEM_LIBRPMEM_SETTINGS_H
#define RPMEM_LIBRPMEM_SETTINGS_H

#include <algorithm>
#include <chrono>
#include <climits>
#include <span>
#include <string>
#include <vector>

namespace rpmem {

struct Settings {
  std::string ssh = "ssh";
  std::vector<std::string> cmds{"rpmemd"};  // RPMEM_CMD split at '|'
  unsigned max_nlanes = UINT_MAX;
  unsigned work_queue_size = 50;
  bool enable_verbs = true;
  bool enable_sockets = true;
  // RPMEM_TIMEOUT: the longest any call may stall for the target, outages
  // included: lanes that stop answering connect again within it, and fail
  // only past it. Control-channel waits get kControlFactor times as long
  // (starting ssh and rpmemd, creating a pool), but no more than the larger
  // of the bound and kControlCap.
  std::chrono::milliseconds timeout{20000};
  static constexpr int kControlFactor = 6;
  static constexpr std::chrono::milliseconds kControlCap{20000};
  // rpmems:// targets: the client's certificate and key (both or neither),
  // and the CA that must have signed the service's certificate.
  std::string tls_cert;  // RPMEM_TLS_CERT
  std::string tls_key;   // RPMEM_TLS_KEY
  std::string tls_ca;    // RPMEM_TLS_CA
  // RPMEM_DATA_TLS=1: the data lanes run inside TLS (or the pool is not
  // opened); a daemon with data-tls = yes or require may turn it on anyway.
  bool data_tls = false;
  // RPMEM_DATA_SEAL (default 1): encrypted lanes may be sealed AES-GCM
  // frames rather than TLS, where the daemon offers them; 0: TLS only.
  bool data_seal = true;
  // RPMEM_DURABILITY: the pool's level, persistent (the default) or visible.
  bool visible = false;
  // RPMEM_ON_LOSS: what a pool does when its target is lost past the bound:
  // fail (the default: every call fails) or continue (`run_ahead`: the
  // pool goes on without its replica, records what changed, and catches up
  // by itself when the target is back).
  bool run_ahead = false;
  // RPMEM_STATE_DIR: where a pool that runs ahead keeps its record (empty:
  // default_state_dir()).
  std::string state_dir;
  // RPMEM_OPEN_BEHIND=1: open a pool whose replica may be behind its master
  // all the same (an override, logged by rpmemd), and read from it.
  bool open_behind = false;
  // Why create and open must fail with EINVAL (a variable read at create
  // and open with a value it does not take), in rpmem_errormsg()'s words;
  // empty when none.
  std::string bad;

  static Settings from_env();
  std::chrono::milliseconds control_timeout() const {
    return std::min(timeout * kControlFactor, std::max(timeout, kControlCap));
  }
  // The next RPMEM_CMD entry, round robin over the process (thread-safe).
  std::string next_cmd() const;
  bool operator==(const Settings &) const = default;
};

// One variable of the environment.
struct Variable {
  const char *name;
  // Its default, as librpmem(7) gives it after "Default:".
  const char *fallback;
  // The words librpmem(7)'s entry for it opens with.
  const char *summary;
  // Read once per process (the log's), else at each create, open, remove.
  bool once;
  // Takes `value` into `s`: false when it is not a value the variable
  // takes (it is then ignored and logged, or, where a wrong value must not
  // be ignored, s.bad says why).
  bool (*read)(const Variable &v, const char *value, Settings &s);
};

// The table, in librpmem(7)'s order.
std::span<const Variable> variables();

// $XDG_STATE_HOME/rpmem, else $HOME/.local/state/rpmem, else
// /var/lib/rpmem (secure-execution mode: the last).
std::string default_state_dir();

// Applies RPMEM_LOG_LEVEL / RPMEM_LOG_FILE, once per process.
void init_logging_once();

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_SETTINGS_H
