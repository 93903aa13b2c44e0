// SPDX-License-Identifier: BSD-3-Clause
// The library's environment: kVariables, one row a variable, and the
// readers its rows use.
#include "librpmem/settings.h"

#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace rpmem {
namespace {

std::atomic<unsigned> g_cmd_index{0};

// Every variable goes through secure_getenv: in a set-user-ID, set-group-ID
// or file-capability program (AT_SECURE) the caller's environment does not
// choose the ssh program, the remote command, the TLS files or a log file.
const char *env(const char *name) { return ::secure_getenv(name); }

// The logging variables' values, read once (init_logging_once).
struct LogSettings {
  int level = 0;
  std::string file;
};
LogSettings g_log;

// Text as it is; empty, the default.
template <std::string Settings::*M>
bool text(const Variable &, const char *value, Settings &s) {
  if (*value != '\0') s.*M = value;
  return true;
}

// Commands separated by '|'; empty, the default.
bool commands(const Variable &, const char *value, Settings &s) {
  if (*value == '\0') return true;
  s.cmds.clear();
  const std::string all(value);
  for (size_t start = 0;;) {
    const size_t bar = all.find('|', start);
    s.cmds.push_back(all.substr(start, bar - start));
    if (bar == std::string::npos) return true;
    start = bar + 1;
  }
}

// A positive decimal integer, clamped to UINT_MAX (as PMDK did). Empty is
// no value: PMDK's test framework exports RPMEM_MAX_NLANES= empty, which
// PMDK ignored without a word.
template <unsigned Settings::*M>
bool count(const Variable &, const char *value, Settings &s) {
  if (*value == '\0') return true;
  errno = 0;
  char *end = nullptr;
  long long n = std::strtoll(value, &end, 10);
  if (errno == ERANGE && n > 0) n = UINT_MAX;
  if (end == value || *end != '\0' || n <= 0) return false;
  s.*M = n > static_cast<long long>(UINT_MAX) ? UINT_MAX : static_cast<unsigned>(n);
  return true;
}

// A decimal integer: non-zero enables. A value that does not parse counts
// as 0 (PMDK disabled verbs on garbage; we keep that for every switch).
template <bool Settings::*M>
bool on_off(const Variable &, const char *value, Settings &s) {
  char *end = nullptr;
  const long n = std::strtol(value, &end, 10);
  s.*M = end != value && *end == '\0' && n != 0;
  return true;
}

// Seconds, with fractions, in (0, 86400); at least a millisecond.
bool seconds(const Variable &, const char *value, Settings &s) {
  char *end = nullptr;
  const double secs = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(secs > 0 && secs < 86400)) return false;
  s.timeout = std::chrono::milliseconds(std::max(1L, std::lround(secs * 1000)));
  return true;
}

// `off` or `on` (empty: the default) into `flag`; anything else fails create
// and open.
bool one_of(const Variable &v, const char *value, const char *off, const char *on, bool &flag,
            Settings &s) {
  if (*value == '\0') return true;
  if (std::strcmp(value, on) == 0 || std::strcmp(value, off) == 0) {
    flag = std::strcmp(value, on) == 0;
    return true;
  }
  s.bad = std::string(v.name) + ": invalid value '" + value + "' (" + off + " or " + on + ")";
  return false;
}

bool durability(const Variable &v, const char *value, Settings &s) {
  return one_of(v, value, "persistent", "visible", s.visible, s);
}

bool on_loss(const Variable &v, const char *value, Settings &s) {
  return one_of(v, value, "fail", "continue", s.run_ahead, s);
}

// 0 nothing .. 5 debug (anything that is not a number is 0).
bool log_level(const Variable &, const char *value, Settings &) {
  g_log.level = std::atoi(value);
  return true;
}

bool log_file(const Variable &, const char *value, Settings &) {
  g_log.file = value;
  return true;
}

// The TLS files' rows: one entry of librpmem(7) names the three.
template <std::string Settings::*M>
constexpr Variable tls_file(const char *name) {
  return {name, "none", "For rpmems:// targets: the client's certificate", false, text<M>};
}

// The rows, in librpmem(7)'s order. `fallback` is what its entry says
// after "Default:", and for a value a reader takes, the default of Settings.
constexpr Variable kVariables[] = {
    {"RPMEM_DURABILITY", "persistent", "The pool's durability level, read at create and open",
     false, durability},
    {"RPMEM_SSH", "ssh", "The remote shell, one word without arguments", false,
     text<&Settings::ssh>},
    {"RPMEM_CMD", "rpmemd", "The command run on the target by the remote shell", false, commands},
    {"RPMEM_MAX_NLANES", "none", "Upper bound on the lanes requested", false,
     count<&Settings::max_nlanes>},
    {"RPMEM_WORK_QUEUE_SIZE", "50", "Flushes a lane may have posted before one must go out", false,
     count<&Settings::work_queue_size>},
    {"RPMEM_ENABLE_SOCKETS", "1", "0 disables the tcp transport", false,
     on_off<&Settings::enable_sockets>},
    {"RPMEM_ENABLE_VERBS", "1", "0 disables the verbs transport", false,
     on_off<&Settings::enable_verbs>},
    {"RPMEM_TIMEOUT", "20", "Seconds any call may stall for the target, outages included", false,
     seconds},
    {"RPMEM_DATA_TLS", "0", "1: the data lanes run inside TLS", false, on_off<&Settings::data_tls>},
    {"RPMEM_DATA_SEAL", "1", "1 or unset: when the lanes are encrypted, the client offers to seal",
     false, on_off<&Settings::data_seal>},
    tls_file<&Settings::tls_cert>("RPMEM_TLS_CERT"),
    tls_file<&Settings::tls_key>("RPMEM_TLS_KEY"),
    tls_file<&Settings::tls_ca>("RPMEM_TLS_CA"),
    {"RPMEM_ON_LOSS", "fail",
     "What a pool does when its target is lost past RPMEM_TIMEOUT, read at create and open", false,
     on_loss},
    {"RPMEM_STATE_DIR", "$XDG_STATE_HOME/rpmem",
     "Where a pool that runs ahead of its target keeps its record", false,
     text<&Settings::state_dir>},
    {"RPMEM_OPEN_BEHIND", "0", "1: open a pool whose replica may be behind its master", false,
     on_off<&Settings::open_behind>},
    {"RPMEM_LOG_LEVEL", "0", "0 nothing", true, log_level},
    {"RPMEM_LOG_FILE", "standard error", "Where the log goes", true, log_file},
};

// Reads the variables of `once` or not into `s`: a wrong value is logged
// and ignored, or fails the call (s.bad).
void read_all(bool once, Settings &s) {
  for (const Variable &v : kVariables) {
    if (v.once != once) continue;
    const char *value = env(v.name);
    if (!value) continue;
    if (!v.read(v, value, s) && s.bad.empty())
      RPMEM_LOG_ERR("%s: invalid value '%s', ignored", v.name, value);
  }
}

}  // namespace

std::span<const Variable> variables() { return kVariables; }

std::string default_state_dir() {
  if (const char *x = env("XDG_STATE_HOME"); x && *x == '/') return std::string(x) + "/rpmem";
  if (const char *h = env("HOME"); h && *h == '/') return std::string(h) + "/.local/state/rpmem";
  return "/var/lib/rpmem";
}

Settings Settings::from_env() {
  Settings s;
  read_all(false, s);
  return s;
}

std::string Settings::next_cmd() const {
  unsigned i = g_cmd_index.fetch_add(1, std::memory_order_relaxed);
  return cmds[i % cmds.size()];
}

void init_logging_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    Settings ignored;
    read_all(true, ignored);
    if (g_log.level <= 0) return;
    auto level = g_log.level >= 5 ? log::Level::kDebug : static_cast<log::Level>(g_log.level);
    std::string file = g_log.file;
    if (!file.empty() && file.back() == '-') file += std::to_string(getpid());
    if (file.empty() || !log::configure(level, log::Sink::kFile, file, "librpmem"))
      log::configure(level, log::Sink::kStderr, {}, "librpmem");
  });
}

}  // namespace rpmem
