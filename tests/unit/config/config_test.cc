// SPDX-License-Identifier: BSD-3-Clause
// Tests of rpmemd's config: defaults, command line, files, precedence, $HOME.
#include "rpmemd/config.h"

#include "common/error.h"
#include "tests/scratch_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

namespace rpmemd {
namespace {

using rpmem::log::Level;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path();
    env_.home = dir_ + "/home";
    std::filesystem::create_directory(env_.home);
    env_.global_config = dir_ + "/global.conf";  // absent unless a test writes it
  }
  rpmem_test::ScratchDir scratch_{"rpmemd_config_test"};

  std::string write(const std::string &path, const std::string &text) {
    std::ofstream(path) << text;
    return path;
  }
  std::string write_user(const std::string &text) { return write(env_.user_config(), text); }
  std::string write_global(const std::string &text) { return write(env_.global_config, text); }

  Config parse(std::initializer_list<const char *> args) {
    std::vector<const char *> argv{"rpmemd"};
    argv.insert(argv.end(), args);
    Config config;
    parse_config(static_cast<int>(argv.size()), argv.data(), env_, config);
    return config;
  }

  // The SetupError that parse() throws (its what() ends with ": <strerror>",
  // which std::system_error appends, so tests match prefixes); fails the test if none is thrown.
  rpmem::SetupError parse_error(std::initializer_list<const char *> args) {
    try {
      parse(args);
    } catch (const rpmem::SetupError &e) {
      return e;
    }
    ADD_FAILURE() << "no SetupError";
    return rpmem::SetupError(0, "");
  }

  Config parse_text(const std::string &text) {
    Config config = default_config(env_);
    parse_config_text(text, "test.conf", env_, config);
    return config;
  }

  rpmem::SetupError text_error(const std::string &text) {
    try {
      parse_text(text);
    } catch (const rpmem::SetupError &e) {
      return e;
    }
    ADD_FAILURE() << "no SetupError for: " << text;
    return rpmem::SetupError(0, "");
  }

  std::string dir_;
  ConfigEnv env_;
};

TEST_F(ConfigTest, DefaultsWithoutFilesOrOptions) {
  Config c = parse({});
  EXPECT_EQ(c.log_file, "/var/log/rpmemd.log");
  EXPECT_EQ(c.poolset_dir, env_.home);
  EXPECT_FALSE(c.persist_apm);
  EXPECT_TRUE(c.persist_general);
  EXPECT_TRUE(c.use_syslog);
  EXPECT_EQ(c.log_level, Level::kErr);
  EXPECT_EQ(c.nthreads, 0u);
  EXPECT_FALSE(c.remove.has_value());
  EXPECT_FALSE(c.force);
  EXPECT_FALSE(c.remove_poolset);
  EXPECT_FALSE(c.help);
  EXPECT_FALSE(c.version);
}

TEST_F(ConfigTest, ParseResetsOutToDefaults) {
  Config c;
  c.persist_apm = true;
  c.log_file = "/stale";
  const char *argv[] = {"rpmemd"};
  parse_config(1, argv, env_, c);
  EXPECT_FALSE(c.persist_apm);
  EXPECT_EQ(c.log_file, "/var/log/rpmemd.log");
}

TEST_F(ConfigTest, DefaultConfigUsesHomeAsPoolsetDir) {
  EXPECT_EQ(default_config(env_).poolset_dir, env_.home);
  EXPECT_EQ(env_.user_config(), env_.home + "/.rpmemd.conf");
}

TEST_F(ConfigTest, EveryLongOptionOnTheCommandLine) {
  Config c = parse({"--log-file", "/l/f", "--poolset-dir", "/p/d", "--persist-apm",
                    "--persist-general", "--use-syslog", "--log-level", "debug", "--remove",
                    "my.set", "--force", "--pool-set", "--nthreads", "7"});
  EXPECT_EQ(c.log_file, "/l/f");
  EXPECT_EQ(c.poolset_dir, "/p/d");
  EXPECT_TRUE(c.persist_apm);
  EXPECT_TRUE(c.persist_general);
  EXPECT_TRUE(c.use_syslog);  // --use-syslog came after --log-file
  EXPECT_EQ(c.log_level, Level::kDebug);
  EXPECT_EQ(c.remove, "my.set");
  EXPECT_TRUE(c.force);
  EXPECT_TRUE(c.remove_poolset);
  EXPECT_EQ(c.nthreads, 7u);
}

TEST_F(ConfigTest, ShortOptionsAndEqualsForms) {
  Config c = parse({"-r", "a.set", "-f", "-s", "-t", "3", "--log-level=warn", "--log-file=/x"});
  EXPECT_EQ(c.remove, "a.set");
  EXPECT_TRUE(c.force);
  EXPECT_TRUE(c.remove_poolset);
  EXPECT_EQ(c.nthreads, 3u);
  EXPECT_EQ(c.log_level, Level::kWarn);
  EXPECT_EQ(c.log_file, "/x");
}

TEST_F(ConfigTest, GroupedAndStickyShortOptions) {
  Config c = parse({"-fs", "-t12", "-rb.set"});
  EXPECT_TRUE(c.force);
  EXPECT_TRUE(c.remove_poolset);
  EXPECT_EQ(c.nthreads, 12u);
  EXPECT_EQ(c.remove, "b.set");
}

TEST_F(ConfigTest, LogFileOnCommandLineTurnsSyslogOff) {
  Config c = parse({"--log-file", "/l"});
  EXPECT_EQ(c.log_file, "/l");
  EXPECT_FALSE(c.use_syslog);
}

TEST_F(ConfigTest, CommandLineAppliedInArgvOrder) {
  EXPECT_FALSE(parse({"--use-syslog", "--log-file", "/l"}).use_syslog);
  EXPECT_TRUE(parse({"--log-file", "/l", "--use-syslog"}).use_syslog);
  EXPECT_EQ(parse({"--log-level", "info", "--log-level", "notice"}).log_level, Level::kNotice);
}

TEST_F(ConfigTest, EveryLogLevelOnTheCommandLine) {
  const std::pair<const char *, Level> levels[] = {{"err", Level::kErr},
                                                   {"warn", Level::kWarn},
                                                   {"notice", Level::kNotice},
                                                   {"info", Level::kInfo},
                                                   {"debug", Level::kDebug}};
  for (const auto &[name, level] : levels) EXPECT_EQ(parse({"--log-level", name}).log_level, level);
}

TEST_F(ConfigTest, HelpAndVersionSetFlags) {
  EXPECT_TRUE(parse({"-h"}).help);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"-V"}).version);
  EXPECT_TRUE(parse({"--version"}).version);
}

TEST_F(ConfigTest, HelpSkipsConfigFiles) {
  write_user("garbage\n");
  EXPECT_TRUE(parse({"-h"}).help);
  EXPECT_TRUE(parse({"-V", "-c", "/nonexistent/file"}).version);
}

TEST_F(ConfigTest, UnknownOptionFailsWithEinval) {
  auto e = parse_error({"--bogus"});
  EXPECT_EQ(e.code().value(), EINVAL);
  EXPECT_THAT(e.what(), HasSubstr("bogus"));
  EXPECT_EQ(parse_error({"-x"}).code().value(), EINVAL);
}

TEST_F(ConfigTest, PositionalArgumentFailsWithEinval) {
  auto e = parse_error({"stray"});
  EXPECT_EQ(e.code().value(), EINVAL);
  EXPECT_THAT(e.what(), HasSubstr("stray"));
}

TEST_F(ConfigTest, MissingOptionArgumentFailsWithEinval) {
  EXPECT_EQ(parse_error({"--log-file"}).code().value(), EINVAL);
  EXPECT_EQ(parse_error({"-t"}).code().value(), EINVAL);
}

TEST_F(ConfigTest, FlagWithValueFailsWithEinval) {
  EXPECT_EQ(parse_error({"--persist-apm=yes"}).code().value(), EINVAL);
}

TEST_F(ConfigTest, NonNumericNthreadsFailsWithEinval) {
  for (const char *bad : {"abc", "3x", "", "-1", "+2", " 4", "99999999999"}) {
    auto e = parse_error({"-t", bad});
    EXPECT_EQ(e.code().value(), EINVAL) << bad;
    EXPECT_THAT(e.what(), HasSubstr("invalid number of threads"));
  }
}

TEST_F(ConfigTest, BadValuesOnCommandLineFailWithEinval) {
  EXPECT_EQ(parse_error({"--log-level", "verbose"}).code().value(), EINVAL);
  EXPECT_EQ(parse_error({"--log-file="}).code().value(), EINVAL);
  EXPECT_EQ(parse_error({"--poolset-dir="}).code().value(), EINVAL);
}

TEST_F(ConfigTest, EveryKeyInAFile) {
  Config c = parse_text(
      "log-file = /f/log\n"
      "poolset-dir = /f/dir\n"
      "persist-apm = yes\n"
      "persist-general = no\n"
      "log-level = info\n"
      "nthreads = 4\n");
  EXPECT_EQ(c.log_file, "/f/log");
  EXPECT_FALSE(c.use_syslog);  // forced by log-file
  EXPECT_EQ(c.poolset_dir, "/f/dir");
  EXPECT_TRUE(c.persist_apm);
  EXPECT_FALSE(c.persist_general);
  EXPECT_EQ(c.log_level, Level::kInfo);
  EXPECT_EQ(c.nthreads, 4u);

  EXPECT_FALSE(parse_text("use-syslog = no\n").use_syslog);
  EXPECT_TRUE(parse_text("use-syslog = no\nuse-syslog = yes").use_syslog);
}

// The sample that the package installs as /etc/rpmemd/rpmemd.conf: every
// key it shows commented out must be valid once uncommented.
TEST_F(ConfigTest, EverySampleLineOfThePackagedConfigIsValid) {
  std::ifstream in(RPMEM_SAMPLE_CONFIG);
  ASSERT_TRUE(in) << RPMEM_SAMPLE_CONFIG;
  std::string line;
  std::string text;
  int keys = 0;
  while (std::getline(in, line)) {
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' &&
        line.find(" = ") != std::string::npos) {
      text += line.substr(1) + "\n";
      ++keys;
    }
  }
  EXPECT_GE(keys, 12);
  Config c = parse_text(text);
  EXPECT_EQ(c.nthreads, 0u);
  EXPECT_EQ(c.tls_key, "/etc/rpmemd/tls/rpmemd.key");
  EXPECT_EQ(c.tls_crl, "/etc/rpmemd/tls/crl.pem");
}

TEST_F(ConfigTest, TlsCrlFromFileAndCommandLine) {
  EXPECT_EQ(parse_text("tls-crl = /etc/rpmemd/tls/crl.pem\n").tls_crl, "/etc/rpmemd/tls/crl.pem");
  EXPECT_EQ(parse({"--tls-crl", "/a/crl.pem"}).tls_crl, "/a/crl.pem");
  EXPECT_EQ(parse({}).tls_crl, "");
}

TEST_F(ConfigTest, EveryLevelAndBooleanInAFile) {
  Config c = parse_text(
      "persist-apm=yes\npersist-apm=no\npersist-general=yes\npersist-general=no\n"
      "use-syslog=yes\nuse-syslog=no\nlog-level=err\nlog-level=warn\nlog-level=notice\n"
      "log-level=info\nlog-level=debug\n");
  EXPECT_FALSE(c.persist_apm);
  EXPECT_FALSE(c.persist_general);
  EXPECT_FALSE(c.use_syslog);
  EXPECT_EQ(c.log_level, Level::kDebug);
}

TEST_F(ConfigTest, LaterFileLinesOverrideEarlierOnes) {
  Config c = parse_text("log-file = /a\nlog-file = /b\npersist-apm = yes\npersist-apm = no\n");
  EXPECT_EQ(c.log_file, "/b");
  EXPECT_FALSE(c.persist_apm);
}

TEST_F(ConfigTest, LogFileForcesSyslogOffWhenRead) {
  EXPECT_FALSE(parse_text("use-syslog = yes\nlog-file = /l\n").use_syslog);
  EXPECT_TRUE(parse_text("log-file = /l\nuse-syslog = yes\n").use_syslog);
}

TEST_F(ConfigTest, WhitespaceAroundKeyAndValueIsTrimmed) {
  Config c = parse_text("\t\t  \t\t  log-file\t\t  =\t\t  /a b/c \t\r\n   log-level=warn");
  EXPECT_EQ(c.log_file, "/a b/c");
  EXPECT_EQ(c.log_level, Level::kWarn);
}

TEST_F(ConfigTest, HashStartsACommentAnywhere) {
  Config c = parse_text(
      "# single line comment\n"
      "\t\t  \t\t  # comment after white space\n"
      "\n"
      "   \t\n"
      "log-file = /l # trailing comment\n"
      "persist-apm=yes# no space before it\n"
      "# log-level = debug\n"
      "poolset-dir = /p#/q\n"
      "log-level = notice # = err # more\n");
  EXPECT_EQ(c.log_file, "/l");
  EXPECT_TRUE(c.persist_apm);
  EXPECT_EQ(c.poolset_dir, "/p");
  EXPECT_EQ(c.log_level, Level::kNotice);
}

TEST_F(ConfigTest, SemicolonIsNotAComment) {
  EXPECT_EQ(parse_text("log-file = /l;x\n").log_file, "/l;x");
  auto e = text_error("; log-file = /l\n");  // the key is "; log-file"
  EXPECT_EQ(e.code().value(), EINVAL);
  EXPECT_EQ(text_error("persist-apm = yes ; comment?\n").code().value(), EINVAL);
  EXPECT_EQ(text_error(";just a note\n").code().value(), EINVAL);
}

TEST_F(ConfigTest, InvalidLinesFailWithFileAndLineNumber) {
  struct Case {
    const char *text;
    const char *line;
  };
  const Case cases[] = {
      {"log-file /no/equals\n", "log-file /no/equals"},
      {"unknown-key = 1\n", "unknown-key = 1"},
      {"port = 7636\n", "port = 7636"},
      {"nthreads = -1\n", "nthreads = -1"},
      {"nthreads = four\n", "nthreads = four"},
      {"log-file =\n", "log-file ="},
      {"log-file = # only a comment\n", "log-file = # only a comment"},
      {"= /value\n", "= /value"},
      {"persist-apm = true\n", "persist-apm = true"},
      {"persist-general = YES\n", "persist-general = YES"},
      {"use-syslog = 1\n", "use-syslog = 1"},
      {"log-level = verbose\n", "log-level = verbose"},
      {"log-level = ERR\n", "log-level = ERR"},
      {"log-file # = /x\n", "log-file # = /x"},
  };
  for (const Case &c : cases) {
    std::string text = "# first line\n\nlog-level = warn\n" + std::string(c.text);
    auto e = text_error(text);
    EXPECT_EQ(e.code().value(), EINVAL) << c.text;
    EXPECT_THAT(e.what(),
                StartsWith("Invalid config file line at test.conf:4\n" + std::string(c.line)))
        << c.text;
  }
}

TEST_F(ConfigTest, LastLineWithoutNewlineIsParsed) {
  EXPECT_EQ(parse_text("log-file = /a\nlog-file = /b").log_file, "/b");
  auto e = text_error("log-file = /a\nbroken");
  EXPECT_THAT(e.what(), StartsWith("Invalid config file line at test.conf:2\nbroken"));
}

TEST_F(ConfigTest, GlobalFileIsRead) {
  write_global("log-level = info\npoolset-dir = /global\n");
  Config c = parse({});
  EXPECT_EQ(c.log_level, Level::kInfo);
  EXPECT_EQ(c.poolset_dir, "/global");
}

TEST_F(ConfigTest, UserFileOverridesGlobalFile) {
  write_global("log-level = info\npoolset-dir = /global\npersist-apm = yes\n");
  write_user("log-level = debug\npersist-apm = no\n");
  Config c = parse({});
  EXPECT_EQ(c.log_level, Level::kDebug);
  EXPECT_EQ(c.poolset_dir, "/global");
  EXPECT_FALSE(c.persist_apm);
}

TEST_F(ConfigTest, CommandLineOverridesBothFiles) {
  write_global("log-level = info\npoolset-dir = /global\n");
  write_user("log-level = debug\nlog-file = /user.log\n");
  Config c = parse({"--log-level", "warn", "--poolset-dir", "/cl"});
  EXPECT_EQ(c.log_level, Level::kWarn);
  EXPECT_EQ(c.poolset_dir, "/cl");
  EXPECT_EQ(c.log_file, "/user.log");
  EXPECT_FALSE(c.use_syslog);
}

TEST_F(ConfigTest, CommandLineSyslogBeatsFileLogFile) {
  write_user("log-file = /user.log\n");
  Config c = parse({"--use-syslog"});
  EXPECT_EQ(c.log_file, "/user.log");
  EXPECT_TRUE(c.use_syslog);
}

TEST_F(ConfigTest, CommandLineLogFileBeatsFileSyslog) {
  write_user("use-syslog = yes\n");
  EXPECT_FALSE(parse({"--log-file", "/cl.log"}).use_syslog);
}

TEST_F(ConfigTest, ConfigOptionSkipsGlobalAndUserFiles) {
  write_global("log-level = info\n");
  write_user("persist-apm = yes\n");
  std::string own = write(dir_ + "/own.conf", "poolset-dir = /own\n");
  for (const char *opt : {"-c", "--config"}) {
    Config c = parse({opt, own.c_str()});
    EXPECT_EQ(c.log_level, Level::kErr);
    EXPECT_FALSE(c.persist_apm);
    EXPECT_EQ(c.poolset_dir, "/own");
  }
  std::string joined = "--config=" + own;
  EXPECT_EQ(parse({joined.c_str()}).poolset_dir, "/own");
  EXPECT_EQ(parse({}).log_level, Level::kInfo);  // without -c both files count
  EXPECT_TRUE(parse({}).persist_apm);
}

TEST_F(ConfigTest, ConfigOptionIsOverriddenByCommandLine) {
  std::string own = write(dir_ + "/own.conf", "log-level = info\n");
  EXPECT_EQ(parse({"--log-level", "debug", "-c", own.c_str()}).log_level, Level::kDebug);
}

TEST_F(ConfigTest, MissingConfigOptionFileFailsWithEnoent) {
  std::string missing = dir_ + "/missing.conf";
  auto e = parse_error({"-c", missing.c_str()});
  EXPECT_EQ(e.code().value(), ENOENT);
  EXPECT_THAT(e.what(), HasSubstr(missing));
}

TEST_F(ConfigTest, UnreadableConfigOptionFileFailsWithItsErrno) {
  EXPECT_EQ(parse_error({"-c", dir_.c_str()}).code().value(), EISDIR);
}

TEST_F(ConfigTest, InvalidConfigOptionFileNamesItInTheError) {
  std::string own = write(dir_ + "/bad.conf", "log-level = warn\nlog-level = loud\n");
  auto e = parse_error({"-c", own.c_str()});
  EXPECT_EQ(e.code().value(), EINVAL);
  EXPECT_THAT(e.what(), StartsWith("Invalid config file line at " + own + ":2\nlog-level = loud"));
}

TEST_F(ConfigTest, InvalidUserFileFails) {
  write_user("\nuse-syslog = maybe\n");
  auto e = parse_error({});
  EXPECT_EQ(e.code().value(), EINVAL);
  EXPECT_THAT(e.what(), StartsWith("Invalid config file line at " + env_.user_config() +
                                   ":2\nuse-syslog = maybe"));
}

TEST_F(ConfigTest, InvalidGlobalFileFails) {
  write_global("persist-apm\n");
  EXPECT_EQ(parse_error({}).code().value(), EINVAL);
}

TEST_F(ConfigTest, HomeIsSubstitutedInPoolsetDirFromFile) {
  EXPECT_EQ(parse_text("poolset-dir = $HOME/pools\n").poolset_dir, env_.home + "/pools");
  EXPECT_EQ(parse_text("poolset-dir = $HOME\n").poolset_dir, env_.home);
  EXPECT_EQ(parse_text("poolset-dir = /a/$HOME/b\n").poolset_dir, "/a/" + env_.home + "/b");
}

TEST_F(ConfigTest, HomeIsSubstitutedInPoolsetDirFromCommandLine) {
  EXPECT_EQ(parse({"--poolset-dir", "$HOME/x"}).poolset_dir, env_.home + "/x");
}

TEST_F(ConfigTest, HomeFollowedByAlphanumericIsLeftAlone) {
  EXPECT_EQ(parse_text("poolset-dir = $HOMEabc\n").poolset_dir, "$HOMEabc");
  EXPECT_EQ(parse_text("poolset-dir = $HOME1/x\n").poolset_dir, "$HOME1/x");
  EXPECT_EQ(parse_text("poolset-dir = $HOME_x\n").poolset_dir, env_.home + "_x");
  EXPECT_EQ(parse_text("poolset-dir = $HOME-x\n").poolset_dir, env_.home + "-x");
}

TEST_F(ConfigTest, OnlyFirstHomeIsSubstituted) {
  EXPECT_EQ(parse_text("poolset-dir = $HOME/$HOME\n").poolset_dir, env_.home + "/$HOME");
  // The first occurrence is skipped, so the second one is not looked at.
  EXPECT_EQ(parse_text("poolset-dir = $HOMEx/$HOME\n").poolset_dir, "$HOMEx/$HOME");
}

TEST_F(ConfigTest, HomeIsNotSubstitutedInLogFile) {
  EXPECT_EQ(parse_text("log-file = $HOME/.logs/rpmemd.log\n").log_file, "$HOME/.logs/rpmemd.log");
  EXPECT_EQ(parse({"--log-file", "$HOME/l"}).log_file, "$HOME/l");
}

// max-lanes, peer-timeout (s), max-handshakes, max-connections,
// max-per-address, max-sessions, max-sessions-per-client, max-lanes-per-client.
auto caps(const Config &c) {
  return std::tuple(c.max_lanes, c.peer_timeout.count(), c.max_handshakes, c.max_connections,
                    c.max_per_address, c.max_sessions, c.max_sessions_per_client,
                    c.max_lanes_per_client);
}

TEST_F(ConfigTest, LaneGrantPeerTimeoutAndServiceCaps) {
  EXPECT_EQ(caps(parse_text("")), std::tuple(64u, 30, 128u, 1024u, 16u, 512u, 64u, 1024u));
  Config c = parse_text(
      "max-lanes = 1024\npeer-timeout = 0\nmax-handshakes = 5\nmax-connections = 6\n"
      "max-per-address = 7\nmax-sessions = 8\nmax-sessions-per-client = 9\n"
      "max-lanes-per-client = 10\n");
  EXPECT_EQ(caps(c), std::tuple(1024u, 0, 5u, 6u, 7u, 8u, 9u, 10u));
  EXPECT_EQ(parse({"--max-lanes-per-client", "11"}).max_lanes_per_client, 11u);
  EXPECT_EQ(parse({"--max-lanes", "3", "--peer-timeout", "10"}).max_lanes, 3u);
  // Below 10 s, a keepalive or two lost or late (librpmem sends one every 3 s)
  // would end a healthy session.
  for (const char *bad :
       {"max-lanes = 0", "max-lanes = 1025", "peer-timeout = 9", "peer-timeout = -1",
        "max-sessions = 0", "max-handshakes = many", "max-lanes-per-client = 0"})
    EXPECT_EQ(text_error(bad).code().value(), EINVAL) << bad;
}

TEST_F(ConfigTest, HandshakeTimeoutInSeconds) {
  EXPECT_EQ(parse_text("").handshake_timeout, 3u);
  EXPECT_EQ(parse_text("handshake-timeout = 10\n").handshake_timeout, 10u);
  EXPECT_EQ(parse({"--handshake-timeout", "60"}).handshake_timeout, 60u);
  for (const char *bad :
       {"handshake-timeout = 0", "handshake-timeout = 61", "handshake-timeout = x"})
    EXPECT_EQ(text_error(bad).code().value(), EINVAL) << bad;
}

TEST_F(ConfigTest, VerbsWindowTakesASizeWithinItsBounds) {
  EXPECT_EQ(parse_text("").verbs_window, size_t{1} << 20);
  EXPECT_EQ(parse_text("verbs-window = 32K\n").verbs_window, size_t{32} << 10);
  EXPECT_EQ(parse_text("verbs-window = 4M\n").verbs_window, size_t{4} << 20);
  EXPECT_EQ(parse_text("verbs-window = 131072\n").verbs_window, size_t{131072});
  EXPECT_EQ(parse({"--verbs-window", "256M"}).verbs_window, size_t{256} << 20);
  for (const char *bad : {"verbs-window = 16K", "verbs-window = 1G", "verbs-window = 1X",
                          "verbs-window = M", "verbs-window = -1M"})
    EXPECT_EQ(text_error(bad).code().value(), EINVAL) << bad;
}

TEST_F(ConfigTest, DataTlsModes) {
  EXPECT_EQ(default_config(env_).data_tls, DataTls::kAllow);
  EXPECT_EQ(parse_text("data-tls = no\n").data_tls, DataTls::kNo);
  EXPECT_EQ(parse_text("data-tls = allow\n").data_tls, DataTls::kAllow);
  EXPECT_EQ(parse_text("data-tls = yes\n").data_tls, DataTls::kYes);
  EXPECT_EQ(parse_text("data-tls = require\n").data_tls, DataTls::kRequire);
  EXPECT_EQ(parse({"--data-tls", "require"}).data_tls, DataTls::kRequire);
  for (const char *bad : {"data-tls = 1", "data-tls = Yes", "data-tls = required"})
    EXPECT_EQ(text_error(bad).code().value(), EINVAL) << bad;
}

TEST_F(ConfigTest, DataSealTakesYesOrNoEvenOnTheCommandLine) {
  EXPECT_TRUE(parse({}).data_seal);
  EXPECT_FALSE(parse_text("data-seal = no\n").data_seal);
  EXPECT_FALSE(parse({"--data-seal", "no"}).data_seal);
  EXPECT_TRUE(parse({"--data-seal=yes"}).data_seal);
  EXPECT_EQ(parse_error({"--data-seal"}).code().value(), EINVAL);
  EXPECT_THAT(parse_error({"--data-seal", "on"}).what(),
              StartsWith("invalid value for --data-seal: 'on'"));
}

TEST_F(ConfigTest, VerbsLandingAutoOrWindows) {
  EXPECT_FALSE(parse({}).verbs_windows_always);
  EXPECT_TRUE(parse_text("verbs-landing = windows\n").verbs_windows_always);
  EXPECT_FALSE(parse_text("verbs-landing = windows\nverbs-landing = auto\n").verbs_windows_always);
  EXPECT_TRUE(parse({"--verbs-landing", "windows"}).verbs_windows_always);
  EXPECT_EQ(text_error("verbs-landing = Windows").code().value(), EINVAL);
}

TEST_F(ConfigTest, StatusSocketIsAnAbsolutePathOrNone) {
  Config d = parse({});
  EXPECT_FALSE(d.status_socket_set);
  EXPECT_EQ(d.status_socket, "");
  Config none = parse_text("status-socket = none\n");
  EXPECT_TRUE(none.status_socket_set);
  EXPECT_EQ(none.status_socket, "");
  Config path = parse({"--status-socket", "/run/x.sock"});
  EXPECT_TRUE(path.status_socket_set);
  EXPECT_EQ(path.status_socket, "/run/x.sock");
  EXPECT_EQ(text_error("status-socket = run/x.sock").code().value(), EINVAL);
  EXPECT_THAT(parse_error({"--status-socket", "x"}).what(),
              StartsWith("invalid value for --status-socket: 'x'"));
}

TEST_F(ConfigTest, ServiceKeysFromFileAndCommandLine) {
  Config d = parse({});
  EXPECT_FALSE(d.service);
  EXPECT_EQ(d.service_listen, "0.0.0.0:7636");
  EXPECT_EQ(d.status_group, "");
  EXPECT_EQ(d.metrics_listen, "");
  EXPECT_FALSE(d.metrics_public);
  Config f = parse_text(
      "service = yes\nservice-listen = [::]:7000\ntls-ca = /a\ntls-cert = /b\ntls-key = /c\n"
      "status-group = g\nmetrics-listen = 127.0.0.1:9\nmetrics-public = yes\n");
  EXPECT_TRUE(f.service);
  EXPECT_EQ(f.service_listen, "[::]:7000");
  EXPECT_EQ(f.tls_ca, "/a");
  EXPECT_EQ(f.tls_cert, "/b");
  EXPECT_EQ(f.tls_key, "/c");
  EXPECT_EQ(f.status_group, "g");
  EXPECT_EQ(f.metrics_listen, "127.0.0.1:9");
  EXPECT_TRUE(f.metrics_public);
  Config c = parse({"--service", "--metrics-public", "--service-listen", "h:1"});
  EXPECT_TRUE(c.service);
  EXPECT_TRUE(c.metrics_public);
  EXPECT_EQ(c.service_listen, "h:1");
  EXPECT_EQ(parse_error({"--service=yes"}).code().value(), EINVAL);
  EXPECT_EQ(text_error("service = on").code().value(), EINVAL);
}

// Options of the command line only are no keys of the files.
TEST_F(ConfigTest, CommandLineOnlyOptionsAreNoFileKeys) {
  for (const char *line : {"config = /x", "remove = p.set", "force = yes", "pool-set = yes",
                           "help = yes", "version = yes"}) {
    EXPECT_THAT(text_error(line).what(), StartsWith("Invalid config file line at test.conf:1"))
        << line;
  }
}

// A Config made without parsing (as the service's tests make one) starts
// with the same defaults, but for poolset_dir.
TEST_F(ConfigTest, DefaultConstructedConfigHasTheDefaults) {
  Config made;
  Config parsed = parse({});
  EXPECT_EQ(made.poolset_dir, "");
  made.poolset_dir = parsed.poolset_dir;
  EXPECT_EQ(made.log_file, parsed.log_file);
  EXPECT_EQ(made.use_syslog, parsed.use_syslog);
  EXPECT_EQ(made.persist_general, parsed.persist_general);
  EXPECT_EQ(made.log_level, parsed.log_level);
  EXPECT_EQ(made.max_lanes, parsed.max_lanes);
  EXPECT_EQ(made.verbs_window, parsed.verbs_window);
  EXPECT_EQ(made.peer_timeout, parsed.peer_timeout);
  EXPECT_EQ(made.data_tls, parsed.data_tls);
  EXPECT_EQ(made.data_seal, parsed.data_seal);
  EXPECT_EQ(made.service_listen, parsed.service_listen);
  EXPECT_EQ(made.max_lanes_per_client, parsed.max_lanes_per_client);
  EXPECT_EQ(made.handshake_timeout, parsed.handshake_timeout);
  EXPECT_TRUE(made.use_syslog);  // log-file's default does not turn it off
  EXPECT_EQ(made.log_file, "/var/log/rpmemd.log");
}

TEST_F(ConfigTest, ReplaceHome) {
  EXPECT_EQ(replace_home("", "/h"), "");
  EXPECT_EQ(replace_home("/abs", "/h"), "/abs");
  EXPECT_EQ(replace_home("$HOME", "/h"), "/h");
  EXPECT_EQ(replace_home("$HOME/a/$HOME", "/h"), "/h/a/$HOME");
  EXPECT_EQ(replace_home("$HOMEa", "/h"), "$HOMEa");
  EXPECT_EQ(replace_home("$HOM", "/h"), "$HOM");
}

TEST_F(ConfigTest, IsAbsoluteDir) {
  EXPECT_TRUE(is_absolute_dir("/"));
  EXPECT_TRUE(is_absolute_dir("/a/b"));
  EXPECT_FALSE(is_absolute_dir(""));
  EXPECT_FALSE(is_absolute_dir("a/b"));
  EXPECT_FALSE(is_absolute_dir("$HOME/x"));
}

TEST_F(ConfigTest, RelativePoolsetDirIsNotRejectedHere) {
  EXPECT_EQ(parse({"--poolset-dir", "rel"}).poolset_dir, "rel");
}

TEST(ConfigEnvTest, FromProcessUsesHomeVariable) {
  const char *old = ::getenv("HOME");
  std::string saved = old ? old : "";
  ::setenv("HOME", "/some/where", 1);
  ConfigEnv env = ConfigEnv::from_process();
  EXPECT_EQ(env.home, "/some/where");
  EXPECT_EQ(env.global_config, "/etc/rpmemd/rpmemd.conf");
  EXPECT_EQ(env.user_config(), "/some/where/.rpmemd.conf");
  if (old) {
    ::setenv("HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("HOME");
  }
}

TEST(ConfigEnvTest, FromProcessFallsBackToPasswdEntry) {
  const char *old = ::getenv("HOME");
  std::string saved = old ? old : "";
  ::unsetenv("HOME");
  try {
    ConfigEnv env = ConfigEnv::from_process();
    EXPECT_FALSE(env.home.empty());
  } catch (const rpmem::SetupError &e) {
    ADD_FAILURE() << "uid " << ::getuid() << " has no passwd entry: " << e.what();
  }
  if (old) ::setenv("HOME", saved.c_str(), 1);
}

TEST(UsageTextTest, MentionsEveryOptionAndTheVersion) {
  std::string text = usage_text("/usr/bin/rpmemd");
  EXPECT_EQ(text.rfind("usage: /usr/bin/rpmemd [--version] [--help] [<args>]\n", 0), 0u) << text;
  EXPECT_NE(text.find(version_text()), std::string::npos);
  EXPECT_EQ(version_text(), std::string("rpmemd version ") + RPMEM_VERSION);
  for (const char *opt : {"-c, --config", "-r, --remove", "-f, --force", "-s, --pool-set",
                          "-t, --nthreads", "-h, --help", "-V, --version", "--log-file",
                          "--poolset-dir", "--persist-apm", "--persist-general", "--use-syslog",
                          "--log-level", "err ", "warn ", "notice ", "info ", "debug "}) {
    EXPECT_NE(text.find(opt), std::string::npos) << opt;
  }
  EXPECT_EQ(text.find('\t'), std::string::npos);
  EXPECT_NE(text.back(), '\n');
}

}  // namespace
}  // namespace rpmemd
