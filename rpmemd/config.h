// SPDX-License-Identifier: BSD-3-Clause
// Config: rpmemd's options, from the command line and the config files
// (/etc/rpmemd/rpmemd.conf, then $HOME/.rpmemd.conf, or only -c FILE), with
// the keys, defaults and $HOME rules of PMDK's rpmemd.
#ifndef RPMEMD_CONFIG_H
#define RPMEMD_CONFIG_H

#include <optional>
#include <string>
#include <vector>

#include "common/log.h"

namespace rpmemd {

struct Config {
  std::string log_file = "/var/log/rpmemd.log";
  std::string poolset_dir;  // default: $HOME
  bool persist_apm = false;
  bool persist_general = true;
  bool use_syslog = true;
  rpmem::log::Level log_level = rpmem::log::Level::kErr;
  unsigned nthreads = 0;  // 0: one per lane

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
  static ConfigEnv from_process();
};

// Parses argv and the config files into `out`. Throws rpmem::SetupError
// (errno EINVAL, or the errno of a file that -c names and cannot be read)
// with a message such as "Invalid config file line at FILE:N".
void parse_config(int argc, const char *const *argv, const ConfigEnv &env, Config &out);

// Parses one config file's text into `out` (`file` names it in messages).
void parse_config_text(const std::string &text, const std::string &file, const ConfigEnv &env,
                       Config &out);

// The text of -h (usage, version, options), without a trailing newline.
std::string usage_text(const char *argv0);

}  // namespace rpmemd

#endif  // RPMEMD_CONFIG_H
