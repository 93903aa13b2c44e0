// SPDX-License-Identifier: BSD-3-Clause
// Logging sinks: stderr, an append-only file, or syslog.
#include "common/log.h"

#include "common/text.h"

#include <fcntl.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace rpmem::log {
namespace {

std::atomic<Level> g_threshold{Level::kNone};
std::mutex g_mu;
Sink g_sink = Sink::kStderr;       // guarded by g_mu
int g_fd = STDERR_FILENO;          // guarded by g_mu
std::string g_ident = "rpmem";     // guarded by g_mu
Prefix g_prefix = Prefix::kIdent;  // guarded by g_mu

int syslog_priority(Level level) {
  switch (level) {
    case Level::kErr:
      return LOG_ERR;
    case Level::kWarn:
      return LOG_WARNING;
    case Level::kNotice:
      return LOG_NOTICE;
    case Level::kInfo:
      return LOG_INFO;
    default:
      return LOG_DEBUG;
  }
}

}  // namespace

std::optional<Level> parse_level(std::string_view name) {
  if (name == "err") return Level::kErr;
  if (name == "warn") return Level::kWarn;
  if (name == "notice") return Level::kNotice;
  if (name == "info") return Level::kInfo;
  if (name == "debug") return Level::kDebug;
  return std::nullopt;
}

const char *level_name(Level level) {
  switch (level) {
    case Level::kErr:
      return "err";
    case Level::kWarn:
      return "warn";
    case Level::kNotice:
      return "notice";
    case Level::kInfo:
      return "info";
    case Level::kDebug:
      return "debug";
    default:
      return "none";
  }
}

bool configure(Level threshold, Sink sink, const std::string &path, const std::string &ident,
               Prefix prefix) {
  std::lock_guard lock(g_mu);
  int fd = STDERR_FILENO;
  if (sink == Sink::kFile) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return false;
  }
  if (g_fd != STDERR_FILENO) ::close(g_fd);
  if (g_sink == Sink::kSyslog && sink != Sink::kSyslog) closelog();
  g_fd = fd;
  g_sink = sink;
  g_ident = ident;
  g_prefix = prefix;
  if (sink == Sink::kSyslog) openlog(g_ident.c_str(), LOG_NDELAY | LOG_PID, LOG_USER);
  g_threshold.store(threshold, std::memory_order_relaxed);
  return true;
}

Level threshold() { return g_threshold.load(std::memory_order_relaxed); }

void write(Level level, const char *fmt, ...) {
  // Tabs written in the format string itself are indentation: four spaces.
  // Everything else that is a control byte came from an argument (a name
  // from the network, a file, the environment) and is escaped, so that no
  // argument can end the line or forge another one.
  std::string format;
  for (const char *p = fmt; *p; ++p) {
    if (*p == '\t')
      format += "    ";
    else
      format += *p;
  }
  char msg[8192];
  va_list ap;
  va_start(ap, fmt);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  vsnprintf(msg, sizeof(msg), format.c_str(), ap);
#pragma GCC diagnostic pop
  va_end(ap);
  std::string text = escape_control(msg);

  std::lock_guard lock(g_mu);
  if (g_sink == Sink::kSyslog) {
    syslog(syslog_priority(level), "%s", text.c_str());
    return;
  }
  std::string line;
  if (g_prefix == Prefix::kIdent)
    line = g_ident + "[" + std::to_string(getpid()) + "]: <" + level_name(level) + "> ";
  line += text;
  line += '\n';
  ssize_t off = 0;
  while (off < static_cast<ssize_t>(line.size())) {
    ssize_t n = ::write(g_fd, line.data() + off, line.size() - off);
    if (n <= 0) break;
    off += n;
  }
}

}  // namespace rpmem::log
