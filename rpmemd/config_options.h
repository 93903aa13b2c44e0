// SPDX-License-Identifier: BSD-3-Clause
// rpmemd's options, one row each (kOptions), with the parsers of their
// values. Only rpmemd/config.cc includes it: it makes the command line, the
// config files, --help and the defaults of Config from the rows (others ask
// rpmemd::options()).
#ifndef RPMEMD_CONFIG_OPTIONS_H
#define RPMEMD_CONFIG_OPTIONS_H

#include "rpmemd/config.h"

#include <charconv>
#include <chrono>
#include <climits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace rpmemd::config_rows {

using Kind = Option::Kind;

// A count: decimal digits only, so "", "-1", "+2" and " 3" are errors rather
// than 0, UINT_MAX-ish or 2 (PMDK's strtoul took them).
inline std::optional<unsigned> parse_count(std::string_view text) {
  unsigned long n = 0;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc() || ptr != end || n > UINT_MAX) return std::nullopt;
  return static_cast<unsigned>(n);
}

// A size in bytes, with an optional K, M or G (binary) suffix. (The sizes of
// pool set files have a grammar of their own: rpmemd/poolset.cc.)
inline std::optional<size_t> parse_size(std::string_view text) {
  const std::string_view suffixes = "KMG";
  size_t shift = 0;
  if (size_t i = text.empty() ? suffixes.npos : suffixes.find(text.back()); i != suffixes.npos) {
    shift = 10 * (i + 1);
    text.remove_suffix(1);
  }
  auto n = parse_count(text);
  if (!n) return std::nullopt;
  return static_cast<size_t>(*n) << shift;
}

inline bool within(const Option &row, unsigned long long n) {
  return n >= row.lo && (row.hi == 0 || n <= row.hi);
}

// The parsers of the rows. A flag given on the command line comes as "yes".
template <bool Config::*Field>
inline bool yes_no(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  if (value != "yes" && value != "no") return false;
  out.*Field = value == "yes";
  return true;
}

template <std::string Config::*Field>
inline bool text(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  if (value.empty()) return false;
  out.*Field = std::string(value);
  return true;
}

template <unsigned Config::*Field>
inline bool number(const Option &row, std::string_view value, const ConfigEnv &, Config &out) {
  auto n = parse_count(value);
  if (!n || !within(row, *n)) return false;
  out.*Field = *n;
  return true;
}

inline bool verbs_window(const Option &row, std::string_view value, const ConfigEnv &,
                         Config &out) {
  auto n = parse_size(value);
  if (!n || !within(row, *n)) return false;
  out.verbs_window = *n;
  return true;
}

inline bool peer_timeout(const Option &row, std::string_view value, const ConfigEnv &,
                         Config &out) {
  auto n = parse_count(value);
  if (!n || (*n != 0 && !within(row, *n))) return false;  // 0: the system's TCP defaults
  out.peer_timeout = std::chrono::seconds(*n);
  return true;
}

inline bool log_file(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  if (value.empty()) return false;
  out.log_file = std::string(value);
  out.use_syslog = false;  // at the moment it is read, as PMDK does
  return true;
}

inline bool poolset_dir(const Option &, std::string_view value, const ConfigEnv &env, Config &out) {
  if (value.empty()) return false;
  out.poolset_dir = replace_home(std::string(value), env.home);
  return true;
}

inline bool log_level(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  auto level = rpmem::log::parse_level(value);
  if (level) out.log_level = *level;
  return level.has_value();
}

inline bool data_tls(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  constexpr std::pair<std::string_view, DataTls> kModes[] = {{"no", DataTls::kNo},
                                                             {"allow", DataTls::kAllow},
                                                             {"yes", DataTls::kYes},
                                                             {"require", DataTls::kRequire}};
  for (const auto &[name, mode] : kModes) {
    if (value == name) {
      out.data_tls = mode;
      return true;
    }
  }
  return false;
}

inline bool verbs_landing(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  if (value != "auto" && value != "windows") return false;
  out.verbs_windows_always = value == "windows";
  return true;
}

inline bool status_socket(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  if (value != "none" && !is_absolute_dir(std::string(value))) return false;
  out.status_socket = value == "none" ? std::string() : std::string(value);
  out.status_socket_set = true;
  return true;
}

inline bool pool_to_remove(const Option &, std::string_view value, const ConfigEnv &, Config &out) {
  out.remove = std::string(value);
  return true;
}

// -c: its file is read before the other options are applied.
inline bool config_option(const Option &, std::string_view, const ConfigEnv &, Config &) {
  return true;
}

inline constexpr unsigned kMaxCap = 1000000;  // what a service cap can be at most

// Every option, in --help's order. A row's default is spelled as a config
// file would write it and goes through the row's parser (log-file's row
// comes before use-syslog's, whose default then stands).
inline constexpr Option kOptions[] = {
    // name, short, in a file, kind, --help's value, bounds, default, parser,
    // help, the command line's error
    {"config", 'c', false, Kind::kText, "<path>", 0, 0, nullptr, config_option,
     "configuration file location", nullptr},
    {"remove", 'r', false, Kind::kText, "<poolset>", 0, 0, nullptr, pool_to_remove,
     "remove pool described by given poolset file", nullptr},
    {"force", 'f', false, Kind::kFlag, "", 0, 0, nullptr, yes_no<&Config::force>,
     "ignore errors when removing a pool", nullptr},
    {"pool-set", 's', false, Kind::kFlag, "", 0, 0, nullptr, yes_no<&Config::remove_poolset>,
     "with --remove, remove the poolset file too", nullptr},
    {"nthreads", 't', true, Kind::kNumber, "<num>", 0, 0, "0", number<&Config::nthreads>,
     "threads serving lanes (0: one per lane, up to #CPUs; 16 on a disk)",
     "invalid number of threads"},
    {"max-lanes", 0, true, Kind::kNumber, "<num>", 1, kMaxLanesLimit, "64",
     number<&Config::max_lanes>, "lanes granted to a pool at most", nullptr},
    // 1M: a flush or relaxed persist of up to 1 MiB takes one round trip,
    // and 64 lanes pin 64 MiB.
    {"verbs-window", 0, true, Kind::kSize, "<size>", kMinVerbsWindow, kMaxVerbsWindow, "1M",
     verbs_window, "verbs, pools in the page cache or on fsdax: each lane's landing window",
     nullptr},
    {"verbs-landing", 0, true, Kind::kText, "<mode>", 0, 0, "auto", verbs_landing,
     "auto (lane windows where the NIC cannot write into the pool) or windows (for every pool)",
     nullptr},
    // librpmem sends a keepalive every 3 s (librpmem/pool.cc): at least 10 s,
    // so that one or two of them lost or late do not end a healthy session.
    {"peer-timeout", 0, true, Kind::kNumber, "<sec>", 10, 86400, "30", peer_timeout,
     "a vanished or stopped client's session ends after about this long; 0: the system's TCP "
     "defaults, hours",
     nullptr},
    {"data-tls", 0, true, Kind::kText, "<mode>", 0, 0, "allow", data_tls,
     "data lanes inside TLS: no, allow (when the client asks), yes (for every client that "
     "can), require",
     nullptr},
    {"data-seal", 0, true, Kind::kText, "<yes|no>", 0, 0, "yes", yes_no<&Config::data_seal>,
     "encrypted lanes as sealed AES-GCM frames for a client that can (yes) or always TLS (no)",
     nullptr},
    // yes: only a client that asks for it (RPMEM_DURABILITY=visible, or a
    // call's flag) gets it, and what it gets is bounded by visible-writeback;
    // no: for a target whose every byte must be persistent when acknowledged.
    {"durability-visible", 0, true, Kind::kText, "<yes|no>", 0, 0, "yes",
     yes_no<&Config::durability_visible>,
     "grant the visible durability level (acknowledged in memory) to clients that ask", nullptr},
    // 5 s: the period of the kernel's own flusher (dirty_writeback_centisecs),
    // which writes back only pages dirty for 30 s; what a user who keeps a
    // replica for availability may lose at the target's power cut.
    {"visible-writeback", 0, true, Kind::kNumber, "<ms>", 10, 600000, "5000",
     number<&Config::visible_writeback_ms>,
     "visible bytes are made persistent at the latest this long after their acknowledgement",
     nullptr},
    {"help", 'h', false, Kind::kFlag, "", 0, 0, nullptr, yes_no<&Config::help>,
     "display help message and exit", nullptr},
    {"version", 'V', false, Kind::kFlag, "", 0, 0, nullptr, yes_no<&Config::version>,
     "display target daemon version and exit", nullptr},
    {"log-file", 0, true, Kind::kText, "<path>", 0, 0, "/var/log/rpmemd.log", log_file,
     "log file location", nullptr},
    {"poolset-dir", 0, true, Kind::kText, "<path>", 0, 0, "$HOME", poolset_dir,
     "pool set files directory", nullptr},
    {"persist-apm", 0, true, Kind::kFlag, "", 0, 0, "no", yes_no<&Config::persist_apm>,
     "enable Appliance Persistency Method", nullptr},
    {"persist-general", 0, true, Kind::kFlag, "", 0, 0, "yes", yes_no<&Config::persist_general>,
     "enable General Server Persistency Mechanism", nullptr},
    {"use-syslog", 0, true, Kind::kFlag, "", 0, 0, "yes", yes_no<&Config::use_syslog>,
     "use syslog(3) for logging messages", nullptr},
    {"log-level", 0, true, Kind::kText, "<level>", 0, 0, "err", log_level, "set log level value",
     nullptr},
    {"service", 0, true, Kind::kFlag, "", 0, 0, "no", yes_no<&Config::service>,
     "run as a service: listen, serve many clients (TLS)", nullptr},
    {"service-listen", 0, true, Kind::kText, "<addr:port>", 0, 0, "0.0.0.0:7636",
     text<&Config::service_listen>, "where the service listens", nullptr},
    {"tls-ca", 0, true, Kind::kText, "<path>", 0, 0, nullptr, text<&Config::tls_ca>,
     "CA certificate(s) that client certificates must chain to", nullptr},
    {"tls-cert", 0, true, Kind::kText, "<path>", 0, 0, nullptr, text<&Config::tls_cert>,
     "the service's certificate chain", nullptr},
    {"tls-key", 0, true, Kind::kText, "<path>", 0, 0, nullptr, text<&Config::tls_key>,
     "the service's private key", nullptr},
    {"tls-crl", 0, true, Kind::kText, "<path>", 0, 0, nullptr, text<&Config::tls_crl>,
     "revoked client certificates (PEM CRLs), reread on SIGHUP", nullptr},
    {"max-handshakes", 0, true, Kind::kNumber, "<num>", 1, kMaxCap, "128",
     number<&Config::max_handshakes>, "service: TLS handshakes in progress at most", nullptr},
    {"max-connections", 0, true, Kind::kNumber, "<num>", 1, kMaxCap, "1024",
     number<&Config::max_connections>, "service: control connections at most", nullptr},
    {"max-per-address", 0, true, Kind::kNumber, "<num>", 1, kMaxCap, "16",
     number<&Config::max_per_address>, "service: unauthenticated connections from one address",
     nullptr},
    {"max-sessions", 0, true, Kind::kNumber, "<num>", 1, kMaxCap, "512",
     number<&Config::max_sessions>, "service: sessions at most", nullptr},
    {"max-sessions-per-client", 0, true, Kind::kNumber, "<num>", 1, kMaxCap, "64",
     number<&Config::max_sessions_per_client>, "service: sessions of one certificate", nullptr},
    {"max-lanes-per-client", 0, true, Kind::kNumber, "<num>", 1, kMaxCap, "1024",
     number<&Config::max_lanes_per_client>, "service: lanes of all sessions of one certificate",
     nullptr},
    // 3 s: a TLS 1.3 handshake is two round trips and a signature each way,
    // well under a second even over a link of 300 ms; a stranger who holds
    // a slot loses it this soon.
    {"handshake-timeout", 0, true, Kind::kNumber, "<sec>", 1, 60, "3",
     number<&Config::handshake_timeout>, "service: a TLS handshake ends within this", nullptr},
    {"status-socket", 0, true, Kind::kText, "<path>", 0, 0, nullptr, status_socket,
     "service: the status socket (none: off; default $RUNTIME_DIRECTORY/status.sock under "
     "systemd)",
     nullptr},
    {"status-group", 0, true, Kind::kText, "<group>", 0, 0, nullptr, text<&Config::status_group>,
     "service: the group that may read the status socket", nullptr},
    {"metrics-listen", 0, true, Kind::kText, "<a:port>", 0, 0, nullptr,
     text<&Config::metrics_listen>, "service: Prometheus metrics over HTTP (loopback only)",
     nullptr},
    {"metrics-public", 0, true, Kind::kFlag, "", 0, 0, "no", yes_no<&Config::metrics_public>,
     "service: let metrics-listen be a non-loopback address", nullptr},
};

}  // namespace rpmemd::config_rows

#endif  // RPMEMD_CONFIG_OPTIONS_H
