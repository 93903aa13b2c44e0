// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: rpmemd config files (parse_config_text) and replace_home.
#include "common/error.h"
#include "rpmemd/config.h"

#include <cstdint>
#include <exception>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  rpmemd::ConfigEnv env;
  env.home = "/home/fuzz";
  env.global_config = "/nonexistent/rpmemd.conf";
  rpmemd::Config cfg = rpmemd::default_config(env);
  try {
    rpmemd::parse_config_text(text, "fuzz.conf", env, cfg);
  } catch (const rpmem::SetupError &) {
    // a refused line: the documented outcome
  }
  (void)rpmemd::replace_home(text, env.home);
  (void)rpmemd::is_absolute_dir(text);
  return 0;
}
