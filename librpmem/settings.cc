// SPDX-License-Identifier: BSD-3-Clause
// Reading the library's environment variables.
#include "librpmem/settings.h"

#include "common/log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
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

// A positive decimal integer, clamped to UINT_MAX; invalid values are logged
// and ignored, as PMDK did. An empty value is no value (PMDK's test
// framework exports RPMEM_MAX_NLANES= empty): ignored without a word.
void read_positive(const char *name, unsigned &out) {
  const char *v = env(name);
  if (!v || *v == '\0') return;
  errno = 0;
  char *end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (errno == ERANGE && n > 0) n = UINT_MAX;
  if (end == v || *end != '\0' || n <= 0) {
    RPMEM_LOG_ERR("%s: invalid value '%s', ignored", name, v);
    return;
  }
  out = n > static_cast<long long>(UINT_MAX) ? UINT_MAX : static_cast<unsigned>(n);
}

// A decimal integer: non-zero enables. A value that does not parse counts as
// 0 (PMDK disabled verbs on garbage; we keep that for both).
bool read_enable(const char *name, bool dflt) {
  const char *v = env(name);
  if (!v) return dflt;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0') return false;
  return n != 0;
}

}  // namespace

Settings Settings::from_env() {
  Settings s;
  if (const char *v = env("RPMEM_SSH"); v && *v) s.ssh = v;
  if (const char *v = env("RPMEM_CMD"); v && *v) {
    s.cmds.clear();
    std::string all(v);
    size_t start = 0;
    for (;;) {
      size_t bar = all.find('|', start);
      s.cmds.push_back(all.substr(start, bar - start));
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
  }
  read_positive("RPMEM_MAX_NLANES", s.max_nlanes);
  read_positive("RPMEM_WORK_QUEUE_SIZE", s.work_queue_size);
  s.enable_verbs = read_enable("RPMEM_ENABLE_VERBS", true);
  s.enable_sockets = read_enable("RPMEM_ENABLE_SOCKETS", true);
  s.data_tls = read_enable("RPMEM_DATA_TLS", false);
  s.data_seal = read_enable("RPMEM_DATA_SEAL", true);
  if (const char *v = env("RPMEM_TLS_CERT")) s.tls_cert = v;
  if (const char *v = env("RPMEM_TLS_KEY")) s.tls_key = v;
  if (const char *v = env("RPMEM_TLS_CA")) s.tls_ca = v;
  if (const char *v = env("RPMEM_DURABILITY"); v && *v) {
    if (std::strcmp(v, "visible") == 0)
      s.visible = true;
    else if (std::strcmp(v, "persistent") != 0)
      s.durability_bad = v;
  }
  if (const char *v = env("RPMEM_TIMEOUT")) {
    char *end = nullptr;
    double secs = std::strtod(v, &end);
    if (end != v && *end == '\0' && secs > 0 && secs < 86400)
      s.timeout = std::chrono::milliseconds(std::max(1L, static_cast<long>(secs * 1000)));
    else
      RPMEM_LOG_ERR("RPMEM_TIMEOUT: invalid value '%s', ignored", v);
  }
  return s;
}

std::string Settings::next_cmd() const {
  unsigned i = g_cmd_index.fetch_add(1, std::memory_order_relaxed);
  return cmds[i % cmds.size()];
}

void init_logging_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char *lvl = env("RPMEM_LOG_LEVEL");
    if (!lvl) return;
    int n = std::atoi(lvl);
    if (n <= 0) return;
    auto level = n >= 5 ? log::Level::kDebug : static_cast<log::Level>(n);
    std::string file;
    if (const char *f = env("RPMEM_LOG_FILE"); f && *f) {
      file = f;
      if (file.back() == '-') file += std::to_string(getpid());
    }
    if (file.empty() || !log::configure(level, log::Sink::kFile, file, "librpmem"))
      log::configure(level, log::Sink::kStderr, {}, "librpmem");
  });
}

}  // namespace rpmem
