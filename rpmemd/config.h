// SPDX-License-Identifier: BSD-3-Clause
// Config: rpmemd's options, from the command line and the config files
// (/etc/rpmemd/rpmemd.conf, then $HOME/.rpmemd.conf, or only -c FILE), with
// the keys, defaults and $HOME rules of PMDK's rpmemd; each option is one
// row of one table (options()).
//
// Thread-safety: every function is reentrant; ConfigEnv::from_process() reads
// the environment, so it must not race with setenv().
#ifndef RPMEMD_CONFIG_H
#define RPMEMD_CONFIG_H

#include "common/log.h"
#include "common/transport/verbs/verbs_wire.h"

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rpmemd {

// Bounds of values (the option table in config.cc checks them).
inline constexpr unsigned kMaxLanesLimit = 1024;
inline constexpr size_t kMinVerbsWindow =
    rpmem::transport::verbs::kMaxInline;  // one inline persist
inline constexpr size_t kMaxVerbsWindow = size_t{256} << 20;

// TLS on the tcp data lanes (data-tls).
enum class DataTls {
  kNo,       // never: a client that asks for it is refused
  kAllow,    // when the client asks (RPMEM_DATA_TLS=1)
  kYes,      // for every client that can (protocol 1.3 and later)
  kRequire,  // for every client; one that cannot is refused
};

struct ConfigEnv;

// The options' values, each member set by its option's row of the table
// (options()). The defaults are the rows': Config() starts with them, but
// for poolset_dir, which is empty until default_config() makes it $HOME.
struct Config {
  Config();

  std::string log_file;
  std::string poolset_dir;
  bool persist_apm{};
  bool persist_general{};
  bool use_syslog{};
  rpmem::log::Level log_level{};
  unsigned nthreads{};  // threads serving tcp lanes; 0: one per lane, at most one per CPU
  // Lanes granted to one pool at most, whatever the client asks.
  unsigned max_lanes{};
  // verbs, a pool that cannot be registered (a file in the page cache,
  // fsdax): each lane's registered landing window, where RDMA writes land
  // before this daemon copies them into the pool.
  size_t verbs_window{};
  // verbs-landing = windows: every pool takes the bounded path, even one the
  // NIC could write into (to measure the copy, or where registering the
  // whole pool pins too much); auto: only those it cannot.
  bool verbs_windows_always{};
  // How soon a client that vanished without closing (power, network) or was
  // stopped loses its session and its pool lock: TCP keepalive and
  // TCP_USER_TIMEOUT on the daemon's TCP connections, and, once the client
  // has sent a keepalive (librpmem sends one every 3 s), the bound on the
  // control channel's silence, in ssh and service mode alike. 0: none of
  // these; the system's TCP defaults (hours).
  std::chrono::seconds peer_timeout{};
  // Data lanes inside TLS: ssh mode keys them with a pre-shared key handed
  // over the ssh channel, service mode with the control channel's
  // certificates.
  DataTls data_tls{};
  // Encrypted lanes are sealed frames for a client that can seal (data-seal).
  bool data_seal{};
  // The visible durability level is granted to a client that asks for it
  // (durability-visible); its bytes are written back at the latest
  // visible_writeback_ms after they were acknowledged (visible-writeback).
  bool durability_visible{};
  unsigned visible_writeback_ms{};

  // Service mode: a long-running daemon on a TCP port, mutual TLS on the
  // control channel; a client certificate's common name CN may use the pool
  // sets under <poolset_dir>/<CN>.
  bool service{};              // --service, service = yes
  std::string service_listen;  // ADDRESS:PORT ([v6]:PORT)
  std::string tls_ca;          // CA that signs client certificates
  std::string tls_cert;        // this daemon's certificate chain
  std::string tls_key;         // and its private key
  std::string tls_crl;         // CRLs of tls_ca (empty: none); SIGHUP rereads
  // Caps of the service; past one, a connection is closed (or an
  // authenticated client told EACCES) with a log line.
  unsigned max_handshakes{};           // TLS handshakes in progress
  unsigned max_connections{};          // control connections in all
  unsigned max_per_address{};          // unauthenticated connections from one address
  unsigned max_sessions{};             // sessions (threads) in all
  unsigned max_sessions_per_client{};  // sessions of one client certificate
  unsigned max_lanes_per_client{};     // lanes of all sessions of one certificate
  // Seconds a control connection has to complete its TLS handshake.
  unsigned handshake_timeout{};
  // The status channel (rpmemd/status_server.h): a Unix socket, mode 0660
  // in `status_group` (empty: the daemon's group). Unset: under systemd
  // (RuntimeDirectory=), $RUNTIME_DIRECTORY/status.sock, else none; set to
  // "none" (empty here): none.
  std::string status_socket;
  bool status_socket_set{};
  std::string status_group;
  // Prometheus metrics over HTTP on ADDRESS:PORT (empty: none); an address
  // that is not loopback only with metrics_public.
  std::string metrics_listen;
  bool metrics_public{};

  // What to do instead of serving a session (command line only).
  std::optional<std::string> remove;  // -r POOLSET
  bool force{};                       // -f
  bool remove_poolset{};              // -s
  bool help{};                        // -h
  bool version{};                     // -V
};

// Where the environment comes in, so that tests can set it.
struct ConfigEnv {
  std::string home;  // $HOME, or the passwd entry of the real uid
  std::string global_config = "/etc/rpmemd/rpmemd.conf";
  // The user file: home + "/.rpmemd.conf".
  std::string user_config() const;
  // Throws rpmem::SetupError when HOME is unset and the real uid has no
  // passwd entry.
  static ConfigEnv from_process();
};

// The defaults, with poolset_dir = env.home.
Config default_config(const ConfigEnv &env);

// Parses argv and the config files into `out`, which is first reset to
// default_config(env). Order: defaults, then the global and the user file
// (or only the -c file), then the command-line options in argv order; so
// the command line wins. With -h or -V, sets out.help / out.version and
// returns without reading any file. argv[0] is the program name.
// Throws rpmem::SetupError: EINVAL for a bad option, value or file line
// ("Invalid config file line at FILE:N\nLINE"); the errno of a file that -c
// names and that cannot be read. Missing optional files are skipped.
void parse_config(int argc, const char *const *argv, const ConfigEnv &env, Config &out);

// Applies one config file's text to `out` line by line (`file` names it in
// messages). A poolset-dir value gets its $HOME substituted (replace_home).
// Throws rpmem::SetupError(EINVAL) on the first invalid line.
void parse_config_text(const std::string &text, const std::string &file, const ConfigEnv &env,
                       Config &out);

// Replaces the first "$HOME" in `value` by `home`, unless the character after
// it is alphanumeric ("$HOMEx" stays). PMDK applies this to poolset-dir only.
std::string replace_home(const std::string &value, const std::string &home);

// True if `path` is absolute (starts with '/'); a lexical check only.
bool is_absolute_dir(const std::string &path);

// One option: a row of the table in config.cc, which is all there is to
// know about it; the command line, the config files, --help and the
// defaults of Config are made from the rows.
struct Option {
  enum class Kind {
    kFlag,    // no value on the command line (yes), yes or no in a file
    kText,    // a value: a word, a path, an address
    kNumber,  // a decimal number within [lo, hi]
    kSize,    // a number of bytes with an optional K, M or G, within [lo, hi]
  };
  // The value's parser: stores it into `out`; false if it is invalid.
  using Parser = bool (*)(const Option &row, std::string_view value, const ConfigEnv &env,
                          Config &out);

  const char *name;  // --NAME, and the key of the config files if in_file
  char short_name;   // -X; '\0': none
  bool in_file;      // a key of the config files too (else the command line only)
  Kind kind;
  const char *arg;            // --help's name of the value ("" for a flag)
  unsigned long long lo, hi;  // kNumber, kSize: the bounds (hi 0: none)
  const char *fallback;       // the default, spelled as in a file; nullptr: none
  Parser parse;
  const char *help;       // --help's text, without the bounds and the default
  const char *bad_value;  // the command line's error for a bad value (nullptr:
                          // "invalid value for --NAME")
};

// The table, in --help's order.
std::span<const Option> options();

// The text of -h (usage, version, options), without a trailing newline.
std::string usage_text(const char *argv0);

// The text of -V: "rpmemd version X.Y.Z", without a trailing newline.
std::string version_text();

}  // namespace rpmemd

#endif  // RPMEMD_CONFIG_H
