// SPDX-License-Identifier: BSD-3-Clause
// Config: rpmemd's options, from the command line and the config files
// (/etc/rpmemd/rpmemd.conf, then $HOME/.rpmemd.conf, or only -c FILE), with
// the keys, defaults and $HOME rules of PMDK's rpmemd.
//
// Thread-safety: every function is reentrant; ConfigEnv::from_process() reads
// the environment, so it must not race with setenv().
#ifndef RPMEMD_CONFIG_H
#define RPMEMD_CONFIG_H

#include "common/log.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace rpmemd {

inline constexpr unsigned kMaxLanesLimit = 1024;
inline constexpr unsigned kDefaultMaxLanes = 64;
inline constexpr size_t kMinVerbsWindow = size_t{32} << 10;  // one inline persist
inline constexpr size_t kMaxVerbsWindow = size_t{256} << 20;

// TLS on the tcp data lanes (data-tls).
enum class DataTls {
  kNo,       // never: a client that asks for it is refused
  kAllow,    // when the client asks (RPMEM_DATA_TLS=1); the default
  kYes,      // for every client that can (protocol 1.3 and later)
  kRequire,  // for every client; one that cannot is refused
};

struct Config {
  std::string log_file = "/var/log/rpmemd.log";
  std::string poolset_dir;  // default: $HOME
  bool persist_apm = false;
  bool persist_general = true;
  bool use_syslog = true;
  rpmem::log::Level log_level = rpmem::log::Level::kErr;
  unsigned nthreads = 0;  // threads serving tcp lanes; 0: one per lane, at most one per CPU
  // Lanes granted to one pool at most, whatever the client asks (1..1024).
  unsigned max_lanes = kDefaultMaxLanes;
  // verbs, a pool that cannot be registered (a file in the page cache,
  // fsdax): each lane's registered landing window, where RDMA writes land
  // before this daemon copies them into the pool. 1 MiB: a flush or relaxed
  // persist of up to 1 MiB takes one round trip, and 64 lanes pin 64 MiB.
  size_t verbs_window = size_t{1} << 20;
  // verbs-landing = windows: every pool takes the bounded path, even one the
  // NIC could write into (to measure the copy, or where registering the
  // whole pool pins too much); auto: only those it cannot.
  bool verbs_windows_always = false;
  // How soon a client that vanished without closing (power, network) loses
  // its session and its pool lock: TCP keepalive and TCP_USER_TIMEOUT on
  // every connection, and, in service mode, the control channel's idle
  // bound. 0: the system's TCP defaults (hours).
  std::chrono::seconds peer_timeout{30};
  // Data lanes inside TLS: ssh mode keys them with a pre-shared key handed
  // over the ssh channel, service mode with the control channel's
  // certificates.
  DataTls data_tls = DataTls::kAllow;
  // Encrypted lanes are sealed frames for a client that can seal (data-seal).
  bool data_seal = true;

  // Service mode: a long-running daemon on a TCP port, mutual TLS on the
  // control channel; a client certificate's common name CN may use the pool
  // sets under <poolset_dir>/<CN>.
  bool service = false;                         // --service, service = yes
  std::string service_listen = "0.0.0.0:7636";  // ADDRESS:PORT ([v6]:PORT)
  std::string tls_ca;                           // CA that signs client certificates
  std::string tls_cert;                         // this daemon's certificate chain
  std::string tls_key;                          // and its private key
  std::string tls_crl;                          // CRLs of tls_ca (empty: none); SIGHUP rereads
  // Caps of the service; past one, a connection is closed (or an
  // authenticated client told EACCES) with a log line.
  unsigned max_handshakes = 128;          // TLS handshakes in progress
  unsigned max_connections = 1024;        // control connections in all
  unsigned max_per_address = 16;          // unauthenticated connections from one address
  unsigned max_sessions = 512;            // sessions (threads) in all
  unsigned max_sessions_per_client = 64;  // sessions of one client certificate
  unsigned max_lanes_per_client = 1024;   // lanes of all sessions of one certificate
  // Seconds a control connection has to complete its TLS handshake (1..60):
  // a TLS 1.3 handshake is two round trips and a signature each way, well
  // under a second even over a link of 300 ms; a stranger who holds a slot
  // loses it this soon.
  unsigned handshake_timeout = 3;
  // The status channel (rpmemd/status_server.h): a Unix socket, mode 0660
  // in `status_group` (empty: the daemon's group). Unset: under systemd
  // (RuntimeDirectory=), $RUNTIME_DIRECTORY/status.sock, else none; set to
  // "none" (empty here): none.
  std::string status_socket;
  bool status_socket_set = false;
  std::string status_group;
  // Prometheus metrics over HTTP on ADDRESS:PORT (empty: none); an address
  // that is not loopback only with metrics_public.
  std::string metrics_listen;
  bool metrics_public = false;

  // What to do instead of serving a session.
  std::optional<std::string> remove;  // -r POOLSET
  bool force = false;                 // -f
  bool remove_poolset = false;        // -s
  bool help = false;                  // -h
  bool version = false;               // -V
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

// The text of -h (usage, version, options), without a trailing newline.
std::string usage_text(const char *argv0);

// The text of -V: "rpmemd version X.Y.Z", without a trailing newline.
std::string version_text();

}  // namespace rpmemd

#endif  // RPMEMD_CONFIG_H
