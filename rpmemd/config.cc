// SPDX-License-Identifier: BSD-3-Clause
// Config: what is made of the option table (rpmemd/config_options.h, a row
// per option with its name, short form, kind and parser, default and help):
// the command line (Boost.ProgramOptions), the config files, --help and the
// defaults Config starts with; and the environment (ConfigEnv).
#include "rpmemd/config.h"

#include "common/error.h"
#include "rpmemd/config_options.h"

#include <boost/program_options.hpp>

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>

namespace rpmemd {
namespace {

namespace po = boost::program_options;
using Kind = Option::Kind;
using config_rows::kOptions;

constexpr std::string_view kHomePlaceholder = "$HOME";
constexpr std::string_view kUserConfigName = ".rpmemd.conf";

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

const Option *find_option(std::string_view name, bool file_key) {
  for (const Option &row : kOptions) {
    if (name == row.name && (row.in_file || !file_key)) return &row;
  }
  return nullptr;
}

// (Each default is a valid value of its row: OptionTableTest checks it.)
void fill_defaults(const ConfigEnv &env, Config &out) {
  for (const Option &row : kOptions) {
    if (row.fallback) row.parse(row, row.fallback, env, out);
  }
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
  const Option *row = find_option(key_name, true);
  return row && row->parse(*row, value, env, out);
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

po::parsed_options parse_command_line(int argc, const char *const *argv) {
  po::options_description desc;
  for (const Option &row : kOptions) {
    std::string names = row.name;
    if (row.short_name) names += std::string{',', row.short_name};
    if (row.kind == Kind::kFlag) {
      desc.add_options()(names.c_str(), "");
    } else {
      desc.add_options()(names.c_str(), po::value<std::string>(), "");
    }
  }
  try {
    return po::command_line_parser(argc, argv)
        .options(desc)
        .style(po::command_line_style::unix_style)
        .run();
  } catch (const po::error &e) {
    throw rpmem::SetupError(EINVAL, std::string("invalid command line: ") + e.what());
  }
}

// Applies one parsed command-line option to `out`; a flag's value is yes.
void apply_option(const po::option &opt, const ConfigEnv &env, Config &out) {
  const Option *row = find_option(opt.string_key, false);
  if (!row) return;
  const std::string arg = opt.value.empty() ? std::string("yes") : opt.value.front();
  if (row->parse(*row, arg, env, out)) return;
  throw rpmem::SetupError(
      EINVAL, row->bad_value ? row->bad_value + std::string(" -- '") + arg + "'"
                             : "invalid value for --" + std::string(row->name) + ": '" + arg + "'");
}

// A bound as --help shows it: a size with the largest suffix that divides it.
std::string bound_text(const Option &row, unsigned long long n) {
  if (row.kind == Kind::kSize && n != 0) {
    constexpr std::pair<unsigned, char> kSuffixes[] = {{30, 'G'}, {20, 'M'}, {10, 'K'}};
    for (auto [shift, suffix] : kSuffixes) {
      if (n % (1ull << shift) == 0) return std::to_string(n >> shift) + suffix;
    }
  }
  return std::to_string(n);
}

constexpr size_t kHelpColumn = 32;
constexpr size_t kWidth = 88;

// One option of --help: "  -x, --name <arg>", then its help, its bounds and
// its default, in words wrapped at kWidth, from kHelpColumn on.
std::string usage_row(const Option &row) {
  std::string line =
      row.short_name ? std::string{' ', ' ', '-', row.short_name, ',', ' '} : std::string(6, ' ');
  line += "--" + std::string(row.name) + (*row.arg ? " " + std::string(row.arg) : "");
  line.resize(std::max(kHelpColumn, line.size() + (line.size() < kHelpColumn ? 1 : 2)), ' ');
  std::string words = row.help;
  if (row.hi || row.fallback) {
    std::string range = row.hi ? bound_text(row, row.lo) + ".." + bound_text(row, row.hi) : "";
    std::string fallback = row.fallback ? std::string("default ") + row.fallback : "";
    words += " (" + range + (row.hi && row.fallback ? ", " : "") + fallback + ")";
  }
  std::string out;
  bool fresh = true;
  for (size_t pos = 0; pos < words.size();) {
    size_t end = std::min(words.find(' ', pos), words.size());
    if (!fresh && line.size() + 1 + (end - pos) > kWidth) {
      out += line + "\n";
      line.assign(kHelpColumn, ' ');
      fresh = true;
    }
    line += (fresh ? "" : " ") + words.substr(pos, end - pos);
    fresh = false;
    pos = end + 1;
  }
  return out + line + "\n";
}

}  // namespace

Config::Config() { fill_defaults(ConfigEnv{}, *this); }

std::span<const Option> options() { return kOptions; }

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
  fill_defaults(env, config);  // again, with env's $HOME
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
  po::parsed_options parsed = parse_command_line(argc, argv);

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
  std::string text = "usage: " + std::string(argv0 ? argv0 : "rpmemd") +
                     " [--version] [--help] [<args>]\n" + version_text() + "\n\nOptions:\n";
  for (const Option &row : kOptions) text += usage_row(row);
  for (std::string_view level : {"err     error conditions", "warn    warning conditions",
                                 "notice  normal, but significant, condition",
                                 "info    informational message", "debug   debug-level message"}) {
    text += std::string(40, ' ') + std::string(level) + "\n";
  }
  text += "\nFor complete documentation see rpmemd(1) manual page.";
  return text;
}

}  // namespace rpmemd
