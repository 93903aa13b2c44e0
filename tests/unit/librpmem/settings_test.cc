// SPDX-License-Identifier: BSD-3-Clause
// Tests of the environment the library reads (Settings::from_env) and of the
// RPMEM_CMD round robin.
#include "librpmem/settings.h"

#include "common/log.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rpmem {
namespace {

using namespace std::chrono_literals;

// Every test starts from an environment without the library's variables and
// leaves the process environment as it found it.
class SettingsEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const Variable &v : variables()) {
      if (const char *old = std::getenv(v.name)) saved_[v.name] = old;
      ::unsetenv(v.name);
    }
  }
  void TearDown() override {
    for (const Variable &v : variables()) {
      auto it = saved_.find(v.name);
      if (it != saved_.end())
        ::setenv(v.name, it->second.c_str(), 1);
      else
        ::unsetenv(v.name);
    }
  }
  static Settings with(const char *name, const char *value) {
    ::setenv(name, value, 1);
    return Settings::from_env();
  }

  std::map<std::string, std::string> saved_;
};

TEST_F(SettingsEnv, DefaultsWhenNothingIsSet) {
  Settings s = Settings::from_env();
  EXPECT_EQ(s.ssh, "ssh");
  EXPECT_EQ(s.cmds, std::vector<std::string>{"rpmemd"});
  EXPECT_EQ(s.max_nlanes, UINT_MAX);
  EXPECT_EQ(s.work_queue_size, 50u);
  EXPECT_TRUE(s.enable_verbs);
  EXPECT_TRUE(s.enable_sockets);
  // The one bound on a stall: outages of 10 s ride through, and rpmemd's
  // peer-timeout (30 s) keeps the session longer than the client waits.
  EXPECT_EQ(s.timeout, 20000ms);
  EXPECT_EQ(s.control_timeout(), s.timeout);
}

TEST_F(SettingsEnv, RpmemSshReplacesSshUnlessEmpty) {
  EXPECT_EQ(with("RPMEM_SSH", "/usr/local/bin/myssh").ssh, "/usr/local/bin/myssh");
  EXPECT_EQ(with("RPMEM_SSH", "").ssh, "ssh");
}

TEST_F(SettingsEnv, RpmemCmdIsSplitAtBars) {
  using V = std::vector<std::string>;
  EXPECT_EQ(with("RPMEM_CMD", "rpmemd -f a.conf").cmds, V{"rpmemd -f a.conf"});
  EXPECT_EQ(with("RPMEM_CMD", "a|b c|/x/rpmemd --log-level=debug").cmds,
            (V{"a", "b c", "/x/rpmemd --log-level=debug"}));
  EXPECT_EQ(with("RPMEM_CMD", "").cmds, V{"rpmemd"});
}

TEST_F(SettingsEnv, MaxNlanesTakesPositiveIntegers) {
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "1").max_nlanes, 1u);
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "7").max_nlanes, 7u);
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "4294967295").max_nlanes, UINT_MAX);
}

TEST_F(SettingsEnv, MaxNlanesIgnoresInvalidAndNonPositiveValues) {
  for (const char *v : {"", "abc", "12x", "x12", "0", "-1", "-99999999999999999999", " ", "1.5"})
    EXPECT_EQ(with("RPMEM_MAX_NLANES", v).max_nlanes, UINT_MAX) << "'" << v << "'";
}

// PMDK's test framework exports RPMEM_MAX_NLANES= (empty): PMDK ignored it
// without a word, and so do we; a value that is really wrong is logged.
TEST_F(SettingsEnv, EmptyMaxNlanesIsUnsetSilentlyAndAWrongOneIsLogged) {
  const std::string path = "/tmp/rpmem-settings-test-" + std::to_string(::getpid()) + ".log";
  ASSERT_TRUE(log::configure(log::Level::kDebug, log::Sink::kFile, path));
  auto logged = [&] {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "").max_nlanes, UINT_MAX);
  EXPECT_EQ(with("RPMEM_WORK_QUEUE_SIZE", "").work_queue_size, 50u);
  EXPECT_EQ(logged(), "");
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "x").max_nlanes, UINT_MAX);
  EXPECT_NE(logged().find("RPMEM_MAX_NLANES: invalid value 'x', ignored"), std::string::npos)
      << logged();
  log::configure(log::Level::kNone, log::Sink::kStderr);
  ::unlink(path.c_str());
}

TEST_F(SettingsEnv, MaxNlanesClampsHugeValuesToUintMax) {
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "4294967296").max_nlanes, UINT_MAX);
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "99999999999999999999999").max_nlanes, UINT_MAX);
}

TEST_F(SettingsEnv, WorkQueueSizeParsesLikeMaxNlanes) {
  EXPECT_EQ(with("RPMEM_WORK_QUEUE_SIZE", "8").work_queue_size, 8u);
  EXPECT_EQ(with("RPMEM_WORK_QUEUE_SIZE", "0").work_queue_size, 50u);
  EXPECT_EQ(with("RPMEM_WORK_QUEUE_SIZE", "junk").work_queue_size, 50u);
}

TEST_F(SettingsEnv, EnableVerbsGarbageDisables) {
  EXPECT_TRUE(with("RPMEM_ENABLE_VERBS", "1").enable_verbs);
  EXPECT_TRUE(with("RPMEM_ENABLE_VERBS", "2").enable_verbs);
  EXPECT_FALSE(with("RPMEM_ENABLE_VERBS", "0").enable_verbs);
  EXPECT_FALSE(with("RPMEM_ENABLE_VERBS", "yes").enable_verbs);
  EXPECT_FALSE(with("RPMEM_ENABLE_VERBS", "1x").enable_verbs);
  EXPECT_FALSE(with("RPMEM_ENABLE_VERBS", "").enable_verbs);
}

TEST_F(SettingsEnv, EnableSocketsZeroDisables) {
  EXPECT_FALSE(with("RPMEM_ENABLE_SOCKETS", "0").enable_sockets);
  EXPECT_TRUE(with("RPMEM_ENABLE_SOCKETS", "1").enable_sockets);
  EXPECT_FALSE(with("RPMEM_ENABLE_SOCKETS", "on").enable_sockets);
}

TEST_F(SettingsEnv, TimeoutIsInSecondsWithFractions) {
  EXPECT_EQ(with("RPMEM_TIMEOUT", "2").timeout, 2000ms);
  EXPECT_EQ(with("RPMEM_TIMEOUT", "0.25").timeout, 250ms);
  EXPECT_EQ(with("RPMEM_TIMEOUT", "600").timeout, 600000ms);
  EXPECT_EQ(with("RPMEM_TIMEOUT", "2").control_timeout(), 2000ms * Settings::kControlFactor);
  // Six times a short bound, for starting ssh and rpmemd, but not past 20 s
  // or the bound itself.
  EXPECT_EQ(with("RPMEM_TIMEOUT", "5").control_timeout(), 20000ms);
  EXPECT_EQ(with("RPMEM_TIMEOUT", "60").control_timeout(), 60000ms);
}

TEST_F(SettingsEnv, TimeoutIgnoresInvalidValues) {
  for (const char *v : {"", "abc", "0", "-1", "5s", "86400", "1e9", "nan", "inf"})
    EXPECT_EQ(with("RPMEM_TIMEOUT", v).timeout, 20000ms) << "'" << v << "'";
}

// 0 < 0.0001 s passes the check in settings.cc:69 and truncates to a 0 ms
// bound, under which every data-path wait fails at once.
TEST_F(SettingsEnv, TimeoutBelowOneMillisecondIsNotZero) {
  EXPECT_GT(with("RPMEM_TIMEOUT", "0.0001").timeout, 0ms);
}

TEST_F(SettingsEnv, DurabilityTakesItsTwoLevelsAndFailsCreateOnAnythingElse) {
  EXPECT_TRUE(with("RPMEM_DURABILITY", "visible").visible);
  EXPECT_FALSE(with("RPMEM_DURABILITY", "persistent").visible);
  EXPECT_EQ(with("RPMEM_DURABILITY", "").bad, "");
  const Settings s = with("RPMEM_DURABILITY", "fast");
  EXPECT_EQ(s.bad, "RPMEM_DURABILITY: invalid value 'fast' (persistent or visible)");
}

TEST_F(SettingsEnv, OnLossTakesFailOrContinueAndFailsCreateOnAnythingElse) {
  EXPECT_TRUE(with("RPMEM_ON_LOSS", "continue").run_ahead);
  EXPECT_FALSE(with("RPMEM_ON_LOSS", "fail").run_ahead);
  EXPECT_EQ(with("RPMEM_ON_LOSS", "go on").bad,
            "RPMEM_ON_LOSS: invalid value 'go on' (fail or continue)");
  EXPECT_TRUE(with("RPMEM_OPEN_BEHIND", "1").open_behind);
  EXPECT_EQ(with("RPMEM_STATE_DIR", "/var/tmp/s").state_dir, "/var/tmp/s");
}

// $XDG_STATE_HOME/rpmem, else under $HOME (each only when absolute).
TEST_F(SettingsEnv, TheStateDirectoryFollowsXdg) {
  std::map<std::string, std::optional<std::string>> kept;
  for (const char *name : {"XDG_STATE_HOME", "HOME"})
    if (const char *v = std::getenv(name))
      kept[name] = v;
    else
      kept[name] = std::nullopt;
  ::setenv("XDG_STATE_HOME", "/x/state", 1);
  EXPECT_EQ(default_state_dir(), "/x/state/rpmem");
  ::setenv("XDG_STATE_HOME", "relative", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(default_state_dir(), "/home/u/.local/state/rpmem");
  for (const auto &[name, v] : kept)
    if (v)
      ::setenv(name.c_str(), v->c_str(), 1);
    else
      ::unsetenv(name.c_str());
}

TEST_F(SettingsEnv, VariablesAreReadAtEachCall) {
  EXPECT_EQ(with("RPMEM_MAX_NLANES", "3").max_nlanes, 3u);
  ::unsetenv("RPMEM_MAX_NLANES");
  EXPECT_EQ(Settings::from_env().max_nlanes, UINT_MAX);
}

TEST(SettingsNextCmd, RoundRobinOverTheProcess) {
  Settings a;
  a.cmds = {"c0", "c1", "c2"};
  Settings b = a;
  // The index is process-wide: wherever it stands now, the next calls go
  // around the list in order, whichever Settings object makes them.
  std::string first = a.next_cmd();
  int start = first[1] - '0';
  for (int i = 1; i <= 7; ++i) {
    const Settings &s = i % 2 ? b : a;
    EXPECT_EQ(s.next_cmd(), "c" + std::to_string((start + i) % 3)) << i;
  }
}

TEST(SettingsNextCmd, SingleCommandIsAlwaysReturned) {
  Settings s;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.next_cmd(), "rpmemd");
}

TEST(SettingsNextCmd, IsFairAcrossThreads) {
  Settings s;
  s.cmds = {"a", "b", "c", "d"};
  constexpr int kThreads = 4, kPerThread = 1000;
  std::vector<std::vector<std::string>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) got[t].push_back(s.next_cmd());
    });
  for (auto &t : threads) t.join();
  std::map<std::string, int> count;
  for (const auto &v : got)
    for (const auto &c : v) ++count[c];
  for (const auto &c : s.cmds) EXPECT_EQ(count[c], kThreads * kPerThread / 4) << c;
}

}  // namespace
}  // namespace rpmem
