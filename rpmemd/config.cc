// SPDX-License-Identifier: BSD-3-Clause
// Config: rpmemd's command line (Boost.ProgramOptions) and config files.
#include "rpmemd/config.h"

#include "common/error.h"

#include <boost/program_options.hpp>

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <string_view>
#include <system_error>

namespace rpmemd {
namespace {

namespace po = boost::program_options;

constexpr std::string_view kHomePlaceholder = "$HOME";
constexpr std::string_view kUserConfigName = ".rpmemd.conf";

// The keys a config file may set; each is also a long option.
enum class Key {
  kLogFile,
  kPoolsetDir,
  kPersistApm,
  kPersistGeneral,
  kUseSyslog,
  kLogLevel,
  kService,
  kServiceListen,
  kTlsCa,
  kTlsCert,
  kTlsKey,
  kTlsCrl,
  kNthreads,
  kMaxLanes,
  kVerbsWindow,
  kVerbsLanding,
  kPeerTimeout,
  kDataTls,
  kDataSeal,
  kMaxHandshakes,
  kMaxConnections,
  kMaxPerAddress,
  kMaxSessions,
  kMaxSessionsPerClient,
  kMaxLanesPerClient,
  kHandshakeTimeout,
  kStatusSocket,
  kStatusGroup,
  kMetricsListen,
  kMetricsPublic,
};

std::optional<Key> find_key(std::string_view name) {
  if (name == "log-file") return Key::kLogFile;
  if (name == "poolset-dir") return Key::kPoolsetDir;
  if (name == "persist-apm") return Key::kPersistApm;
  if (name == "persist-general") return Key::kPersistGeneral;
  if (name == "use-syslog") return Key::kUseSyslog;
  if (name == "log-level") return Key::kLogLevel;
  if (name == "service") return Key::kService;
  if (name == "service-listen") return Key::kServiceListen;
  if (name == "tls-ca") return Key::kTlsCa;
  if (name == "tls-cert") return Key::kTlsCert;
  if (name == "tls-key") return Key::kTlsKey;
  if (name == "tls-crl") return Key::kTlsCrl;
  if (name == "nthreads") return Key::kNthreads;
  if (name == "max-lanes") return Key::kMaxLanes;
  if (name == "verbs-window") return Key::kVerbsWindow;
  if (name == "verbs-landing") return Key::kVerbsLanding;
  if (name == "peer-timeout") return Key::kPeerTimeout;
  if (name == "data-tls") return Key::kDataTls;
  if (name == "data-seal") return Key::kDataSeal;
  if (name == "max-handshakes") return Key::kMaxHandshakes;
  if (name == "max-connections") return Key::kMaxConnections;
  if (name == "max-per-address") return Key::kMaxPerAddress;
  if (name == "max-sessions") return Key::kMaxSessions;
  if (name == "max-sessions-per-client") return Key::kMaxSessionsPerClient;
  if (name == "max-lanes-per-client") return Key::kMaxLanesPerClient;
  if (name == "handshake-timeout") return Key::kHandshakeTimeout;
  if (name == "status-socket") return Key::kStatusSocket;
  if (name == "status-group") return Key::kStatusGroup;
  if (name == "metrics-listen") return Key::kMetricsListen;
  if (name == "metrics-public") return Key::kMetricsPublic;
  return std::nullopt;
}

// isspace()/isalnum() of the C locale, which is what PMDK ran under, whatever
// the process locale is.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
bool is_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool parse_bool(std::string_view value, bool &out) {
  if (value == "yes") {
    out = true;
  } else if (value == "no") {
    out = false;
  } else {
    return false;
  }
  return true;
}

// A command-line flag (no value) means yes; a file value must be yes or no.
bool set_bool(bool &field, std::optional<std::string_view> value) {
  if (!value) {
    field = true;
    return true;
  }
  return parse_bool(*value, field);
}

// A thread count: decimal digits only, so "", "-1", "+2" and " 3" are
// errors rather than 0, UINT_MAX-ish or 2 (PMDK's strtoul took them).
std::optional<unsigned> parse_count(std::string_view text) {
  unsigned long n = 0;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc() || ptr != end || n > UINT_MAX) return std::nullopt;
  return static_cast<unsigned>(n);
}

// A size in bytes, with an optional K, M or G (binary) suffix.
std::optional<size_t> parse_size(std::string_view text) {
  size_t shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
  }
  if (shift) text.remove_suffix(1);
  auto n = parse_count(text);
  if (!n) return std::nullopt;
  return static_cast<size_t>(*n) << shift;
}

// Sets `key` from `value`; a flag given on the command line has no value and
// means yes. Returns false for an invalid value.
bool apply_value(Key key, std::optional<std::string_view> value, const ConfigEnv &env,
                 Config &out) {
  if (value && value->empty()) return false;
  switch (key) {
    case Key::kLogFile:
      if (!value) return false;
      out.log_file = std::string(*value);
      out.use_syslog = false;  // at the moment it is read, as PMDK does
      return true;
    case Key::kPoolsetDir:
      if (!value) return false;
      out.poolset_dir = replace_home(std::string(*value), env.home);
      return true;
    case Key::kPersistApm:
      return set_bool(out.persist_apm, value);
    case Key::kPersistGeneral:
      return set_bool(out.persist_general, value);
    case Key::kUseSyslog:
      return set_bool(out.use_syslog, value);
    case Key::kLogLevel: {
      if (!value) return false;
      auto level = rpmem::log::parse_level(*value);
      if (!level) return false;
      out.log_level = *level;
      return true;
    }
    case Key::kService:
      return set_bool(out.service, value);
    case Key::kServiceListen:
    case Key::kTlsCa:
    case Key::kTlsCert:
    case Key::kTlsKey:
    case Key::kTlsCrl: {
      if (!value) return false;
      std::string &field = key == Key::kServiceListen ? out.service_listen
                           : key == Key::kTlsCa       ? out.tls_ca
                           : key == Key::kTlsCert     ? out.tls_cert
                           : key == Key::kTlsCrl      ? out.tls_crl
                                                      : out.tls_key;
      field = std::string(*value);
      return true;
    }
    case Key::kNthreads: {
      if (!value) return false;
      auto n = parse_count(*value);
      if (!n) return false;
      out.nthreads = *n;
      return true;
    }
    case Key::kMaxLanes: {  // 1..1024
      if (!value) return false;
      auto n = parse_count(*value);
      if (!n || *n == 0 || *n > kMaxLanesLimit) return false;
      out.max_lanes = *n;
      return true;
    }
    case Key::kHandshakeTimeout: {  // 1..60 seconds
      if (!value) return false;
      auto n = parse_count(*value);
      if (!n || *n == 0 || *n > 60) return false;
      out.handshake_timeout = *n;
      return true;
    }
    case Key::kStatusSocket:  // an absolute path, or none
      if (!value || (*value != "none" && !is_absolute_dir(std::string(*value)))) return false;
      out.status_socket = *value == "none" ? std::string() : std::string(*value);
      out.status_socket_set = true;
      return true;
    case Key::kStatusGroup:
    case Key::kMetricsListen:
      if (!value) return false;
      (key == Key::kStatusGroup ? out.status_group : out.metrics_listen) = std::string(*value);
      return true;
    case Key::kMetricsPublic:
      return set_bool(out.metrics_public, value);
    case Key::kVerbsLanding:  // auto | windows
      if (!value || (*value != "auto" && *value != "windows")) return false;
      out.verbs_windows_always = *value == "windows";
      return true;
    case Key::kVerbsWindow: {  // 32K..256M
      if (!value) return false;
      auto n = parse_size(*value);
      if (!n || *n < kMinVerbsWindow || *n > kMaxVerbsWindow) return false;
      out.verbs_window = *n;
      return true;
    }
    case Key::kMaxHandshakes:
    case Key::kMaxConnections:
    case Key::kMaxPerAddress:
    case Key::kMaxSessions:
    case Key::kMaxSessionsPerClient:
    case Key::kMaxLanesPerClient: {  // service caps: 1..1000000
      if (!value) return false;
      auto n = parse_count(*value);
      if (!n || *n == 0 || *n > 1000000) return false;
      unsigned &field = key == Key::kMaxHandshakes          ? out.max_handshakes
                        : key == Key::kMaxConnections       ? out.max_connections
                        : key == Key::kMaxPerAddress        ? out.max_per_address
                        : key == Key::kMaxSessions          ? out.max_sessions
                        : key == Key::kMaxSessionsPerClient ? out.max_sessions_per_client
                                                            : out.max_lanes_per_client;
      field = *n;
      return true;
    }
    case Key::kDataTls: {
      if (!value) return false;
      if (*value == "no")
        out.data_tls = DataTls::kNo;
      else if (*value == "allow")
        out.data_tls = DataTls::kAllow;
      else if (*value == "yes")
        out.data_tls = DataTls::kYes;
      else if (*value == "require")
        out.data_tls = DataTls::kRequire;
      else
        return false;
      return true;
    }
    case Key::kDataSeal:
      return value && parse_bool(*value, out.data_seal);
    case Key::kPeerTimeout: {  // seconds; 0: the system's TCP defaults
      if (!value) return false;
      auto n = parse_count(*value);
      // Clients send a keepalive every 3 s: a bound below 10 s would end
      // healthy sessions.
      if (!n || (*n > 0 && *n < 10) || *n > 86400) return false;
      out.peer_timeout = std::chrono::seconds(*n);
      return true;
    }
  }
  return false;
}

// One line without its '\n'. Returns false if it is invalid.
bool parse_line(std::string_view line, const ConfigEnv &env, Config &out) {
  // '#' starts a comment anywhere, so an '=' after it does not count.
  std::string_view content = line.substr(0, line.find('#'));
  size_t eq = content.find('=');
  if (eq == std::string_view::npos) return trim(content).empty();
  std::string_view key_name = trim(content.substr(0, eq));
  std::string_view value = trim(content.substr(eq + 1));
  if (key_name.empty() || value.empty()) return false;
  auto key = find_key(key_name);
  return key && apply_value(*key, value, env, out);
}

// The whole file, or nullopt if it cannot be read and is not `required`.
std::optional<std::string> read_file(const std::string &path, bool required) {
  auto fail = [&](int err) -> std::optional<std::string> {
    if (!required) return std::nullopt;
    throw rpmem::SetupError(err, path + ": " + std::generic_category().message(err));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return fail(err);
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

void parse_file(const std::string &path, bool required, const ConfigEnv &env, Config &out) {
  if (auto text = read_file(path, required)) parse_config_text(*text, path, env, out);
}

unsigned parse_nthreads(const std::string &arg) {
  auto n = parse_count(arg);
  if (!n) throw rpmem::SetupError(EINVAL, "invalid number of threads -- '" + arg + "'");
  return *n;
}

po::options_description command_line_options() {
  po::options_description desc;
  desc.add_options()                                         //
      ("help,h", "")                                         //
      ("version,V", "")                                      //
      ("config,c", po::value<std::string>())                 //
      ("remove,r", po::value<std::string>())                 //
      ("force,f", "")                                        //
      ("pool-set,s", "")                                     //
      ("nthreads,t", po::value<std::string>())               //
      ("max-lanes", po::value<std::string>())                //
      ("verbs-window", po::value<std::string>())             //
      ("verbs-landing", po::value<std::string>())            //
      ("peer-timeout", po::value<std::string>())             //
      ("data-tls", po::value<std::string>())                 //
      ("data-seal", po::value<std::string>())                //
      ("max-handshakes", po::value<std::string>())           //
      ("max-connections", po::value<std::string>())          //
      ("max-per-address", po::value<std::string>())          //
      ("max-sessions", po::value<std::string>())             //
      ("max-sessions-per-client", po::value<std::string>())  //
      ("max-lanes-per-client", po::value<std::string>())     //
      ("handshake-timeout", po::value<std::string>())        //
      ("status-socket", po::value<std::string>())            //
      ("status-group", po::value<std::string>())             //
      ("metrics-listen", po::value<std::string>())           //
      ("metrics-public", "")                                 //
      ("log-file", po::value<std::string>())                 //
      ("poolset-dir", po::value<std::string>())              //
      ("persist-apm", "")                                    //
      ("persist-general", "")                                //
      ("use-syslog", "")                                     //
      ("log-level", po::value<std::string>())                //
      ("service", "")                                        //
      ("service-listen", po::value<std::string>())           //
      ("tls-ca", po::value<std::string>())                   //
      ("tls-cert", po::value<std::string>())                 //
      ("tls-key", po::value<std::string>())                  //
      ("tls-crl", po::value<std::string>());
  return desc;
}

// Applies one parsed command-line option (not -c, -h, -V) to `out`.
void apply_option(const po::option &opt, const ConfigEnv &env, Config &out) {
  const std::string &name = opt.string_key;
  const std::string *arg = opt.value.empty() ? nullptr : &opt.value.front();
  if (name == "remove") {
    out.remove = *arg;
  } else if (name == "force") {
    out.force = true;
  } else if (name == "pool-set") {
    out.remove_poolset = true;
  } else if (name == "nthreads") {
    out.nthreads = parse_nthreads(*arg);
  } else if (auto key = find_key(name)) {
    std::optional<std::string_view> value;
    if (arg) value = *arg;
    if (!apply_value(*key, value, env, out)) {
      throw rpmem::SetupError(
          EINVAL, "invalid value for --" + name + ": '" + (arg ? *arg : std::string()) + "'");
    }
  }
}

}  // namespace

std::string ConfigEnv::user_config() const { return home + "/" + std::string(kUserConfigName); }

ConfigEnv ConfigEnv::from_process() {
  ConfigEnv env;
  if (const char *home = std::getenv("HOME")) {
    env.home = home;
    return env;
  }
  uid_t uid = ::getuid();
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::string buf(size > 0 ? static_cast<size_t>(size) : 16384, '\0');
  for (;;) {
    passwd pw{};
    passwd *result = nullptr;
    int err = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &result);
    if (err == ERANGE) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (err != 0 || result == nullptr || result->pw_dir == nullptr) {
      throw rpmem::SetupError(err != 0 ? err : ENOENT,
                              "cannot find the home directory of uid " + std::to_string(uid));
    }
    env.home = result->pw_dir;
    return env;
  }
}

Config default_config(const ConfigEnv &env) {
  Config config;
  config.poolset_dir = env.home;
  return config;
}

void parse_config_text(const std::string &text, const std::string &file, const ConfigEnv &env,
                       Config &out) {
  std::string_view rest = text;
  for (unsigned long line_no = 1; !rest.empty(); ++line_no) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    if (!parse_line(line, env, out)) {
      throw rpmem::SetupError(EINVAL, "Invalid config file line at " + file + ":" +
                                          std::to_string(line_no) + "\n" + std::string(line));
    }
  }
}

void parse_config(int argc, const char *const *argv, const ConfigEnv &env, Config &out) {
  out = default_config(env);
  po::parsed_options parsed(nullptr);
  try {
    parsed = po::command_line_parser(argc, argv)
                 .options(command_line_options())
                 .style(po::command_line_style::unix_style)
                 .run();
  } catch (const po::error &e) {
    throw rpmem::SetupError(EINVAL, std::string("invalid command line: ") + e.what());
  }

  std::optional<std::string> config_file;
  for (const po::option &opt : parsed.options) {
    if (opt.position_key != -1 || opt.unregistered) {
      std::string token = opt.original_tokens.empty() ? "" : opt.original_tokens.front();
      throw rpmem::SetupError(EINVAL, "invalid command line: unexpected argument '" + token + "'");
    }
    if (opt.string_key == "help") out.help = true;
    if (opt.string_key == "version") out.version = true;
    if (opt.string_key == "config") config_file = opt.value.front();
  }
  // PMDK prints and exits while still reading the command line.
  if (out.help || out.version) return;

  if (config_file) {
    parse_file(*config_file, true, env, out);
  } else {
    parse_file(env.global_config, false, env, out);
    parse_file(env.user_config(), false, env, out);
  }

  // In argv order, so that "--log-file F --use-syslog" ends with syslog on.
  for (const po::option &opt : parsed.options) apply_option(opt, env, out);
}

std::string replace_home(const std::string &value, const std::string &home) {
  size_t pos = value.find(kHomePlaceholder);
  if (pos == std::string::npos) return value;
  size_t after = pos + kHomePlaceholder.size();
  if (after < value.size() && is_alnum(value[after])) return value;
  return value.substr(0, pos) + home + value.substr(after);
}

bool is_absolute_dir(const std::string &path) { return !path.empty() && path.front() == '/'; }

std::string version_text() { return "rpmemd version " RPMEM_VERSION; }

std::string usage_text(const char *argv0) {
  constexpr std::string_view kIndent = "                                        ";
  std::string text = "usage: " + std::string(argv0 ? argv0 : "rpmemd") +
                     " [--version] [--help] [<args>]\n" + version_text() + "\n";
  text +=
      "\n"
      "Options:\n"
      "  -c, --config <path>           configuration file location\n"
      "  -r, --remove <poolset>        remove pool described by given poolset file\n"
      "  -f, --force                   ignore errors when removing a pool\n"
      "  -s, --pool-set                with --remove, remove the poolset file too\n"
      "  -t, --nthreads <num>          threads serving lanes (0: one per lane, up to #CPUs; 16 on "
      "a disk)\n"
      "      --max-lanes <num>         lanes granted to a pool at most (1..1024, default 64)\n"
      "      --verbs-window <size>     verbs, pools in the page cache or on fsdax: each lane's\n"
      "                                landing window (32K..256M, default 1M)\n"
      "      --verbs-landing <mode>    auto (lane windows where the NIC cannot write into the\n"
      "                                pool) or windows (for every pool)\n"
      "      --peer-timeout <sec>      a vanished or stopped client's session ends after about\n"
      "                                this long (default 30, at least 10; 0: never)\n"
      "      --data-tls <mode>         data lanes inside TLS: no, allow (when the client asks;\n"
      "                                the default), yes (for every client that can), require\n"
      "      --data-seal <yes|no>      encrypted lanes as sealed AES-GCM frames for a client\n"
      "                                that can (yes, the default) or always TLS (no)\n"
      "  -h, --help                    display help message and exit\n"
      "  -V, --version                 display target daemon version and exit\n"
      "      --log-file <path>         log file location\n"
      "      --poolset-dir <path>      pool set files directory\n"
      "      --persist-apm             enable Appliance Persistency Method\n"
      "      --persist-general         enable General Server Persistency Mechanism\n"
      "      --use-syslog              use syslog(3) for logging messages\n"
      "      --log-level <level>       set log level value\n"
      "      --service                 run as a service: listen, serve many clients (TLS)\n"
      "      --service-listen <addr:port>  where the service listens (0.0.0.0:7636)\n"
      "      --tls-ca <path>           CA certificate(s) that client certificates must chain to\n"
      "      --tls-cert <path>         the service's certificate chain\n"
      "      --tls-key <path>          the service's private key\n"
      "      --tls-crl <path>          revoked client certificates (PEM CRLs), reread on SIGHUP\n"
      "      --max-handshakes <num>    service: TLS handshakes in progress at most (128)\n"
      "      --max-connections <num>   service: control connections at most (1024)\n"
      "      --max-per-address <num>   service: unauthenticated connections from one address (16)\n"
      "      --max-sessions <num>      service: sessions at most (512)\n"
      "      --max-sessions-per-client <num>  service: sessions of one certificate (64)\n"
      "      --max-lanes-per-client <num>  service: lanes of all sessions of one certificate "
      "(1024)\n"
      "      --handshake-timeout <sec> service: a TLS handshake ends within this (1..60, 3)\n"
      "      --status-socket <path>    service: the status socket (none: off; default\n"
      "                                $RUNTIME_DIRECTORY/status.sock under systemd)\n"
      "      --status-group <group>    service: the group that may read the status socket\n"
      "      --metrics-listen <a:port> service: Prometheus metrics over HTTP (loopback only)\n"
      "      --metrics-public          service: let metrics-listen be a non-loopback address\n";
  for (std::string_view level : {"err     error conditions", "warn    warning conditions",
                                 "notice  normal, but significant, condition",
                                 "info    informational message", "debug   debug-level message"}) {
    text += std::string(kIndent) + std::string(level) + "\n";
  }
  text += "\nFor complete documentation see rpmemd(1) manual page.";
  return text;
}

}  // namespace rpmemd
