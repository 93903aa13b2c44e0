// SPDX-License-Identifier: BSD-3-Clause
// Logging for both sides: levels, and a sink that is stderr, a file or syslog.
//
// Thread-safety: every function may be called from any thread. configure()
// should happen before other threads log, but is safe at any time.
#ifndef RPMEM_COMMON_LOG_H
#define RPMEM_COMMON_LOG_H

#include <optional>
#include <string>
#include <string_view>

namespace rpmem::log {

enum class Level { kNone = 0, kErr = 1, kWarn = 2, kNotice = 3, kInfo = 4, kDebug = 5 };

enum class Sink { kStderr, kFile, kSyslog };

// How a stderr or file line starts. kIdent: "<ident>[<pid>]: <<level>> "
// (librpmem's log, rpmemd's stderr). kBare: nothing, the message alone, as
// PMDK's rpmemd wrote its --log-file. Syslog lines are always bare: syslog
// adds its own prefix.
enum class Prefix { kIdent, kBare };

// Parses "err|warn|notice|info|debug"; nullopt for anything else.
std::optional<Level> parse_level(std::string_view name);
const char *level_name(Level level);

// Sets the threshold and the sink. For kFile, `path` is opened for append
// (a failure returns false and keeps the previous sink). `ident` prefixes
// stderr/file lines (unless `prefix` is kBare) and names the syslog identity.
bool configure(Level threshold, Sink sink, const std::string &path = {},
               const std::string &ident = "rpmem", Prefix prefix = Prefix::kIdent);

Level threshold();
inline bool enabled(Level level) { return level != Level::kNone && level <= threshold(); }

// printf-style; one call is one line: a block (a heading and its indented
// lines) is several calls. Tabs in `fmt` itself are written as four spaces;
// every other control byte of the formatted message (0x00..0x1f, 0x7f) is
// escaped as escape_control() does ("\n", "\r", "\t", "\xNN"), so a line is
// one line.
void write(Level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace rpmem::log

#define RPMEM_LOG(level, ...)                                       \
  do {                                                              \
    if (::rpmem::log::enabled(::rpmem::log::Level::level))          \
      ::rpmem::log::write(::rpmem::log::Level::level, __VA_ARGS__); \
  } while (0)
#define RPMEM_LOG_ERR(...) RPMEM_LOG(kErr, __VA_ARGS__)
#define RPMEM_LOG_WARN(...) RPMEM_LOG(kWarn, __VA_ARGS__)
#define RPMEM_LOG_NOTICE(...) RPMEM_LOG(kNotice, __VA_ARGS__)
#define RPMEM_LOG_INFO(...) RPMEM_LOG(kInfo, __VA_ARGS__)
#define RPMEM_LOG_DEBUG(...) RPMEM_LOG(kDebug, __VA_ARGS__)

#endif  // RPMEM_COMMON_LOG_H
