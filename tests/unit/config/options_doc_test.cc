// SPDX-License-Identifier: BSD-3-Clause
// Tests that rpmemd's option table (rpmemd::options()) is what the
// documentation says: every option in rpmemd(1)'s OPTIONS with its short
// form, every config key in its CONFIGURATION list and in the sample config
// (packaging/rpmemd.conf) with the table's default, and no option in either
// that the table lacks; and that the table itself is sound.
#include "common/error.h"
#include "rpmemd/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace rpmemd {
namespace {

using ::testing::ContainerEq;
using ::testing::HasSubstr;

std::vector<std::string> read_lines(const char *path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A troff line as text: "\-" is '-', font changes (\fB, \fI, \fP, \fR) go.
std::string plain(std::string line) {
  line = std::regex_replace(line, std::regex(R"(\\-)"), "-");
  return std::regex_replace(line, std::regex(R"(\\f[BIRP])"), "");
}

// The lines of the man page's section `name` (.SH name up to the next .SH).
std::vector<std::string> man_section(const std::string &name) {
  std::vector<std::string> out;
  bool in = false;
  for (const std::string &line : read_lines(RPMEM_MAN_PAGE)) {
    if (line.rfind(".SH", 0) == 0) {
      in = line == ".SH " + name;
      continue;
    }
    if (in) out.push_back(plain(line));
  }
  EXPECT_FALSE(out.empty()) << "no section " << name << " in " << RPMEM_MAN_PAGE;
  return out;
}

// One entry of OPTIONS: a .TP tag line, and the text up to the next .TP.
struct ManEntry {
  std::string tag;
  std::string text;
};

// OPTIONS' entries by the long options their tags name ("--persist-apm,
// --persist-general" is one entry of two).
std::map<std::string, ManEntry> man_options() {
  std::vector<std::string> lines = man_section("OPTIONS");
  std::map<std::string, ManEntry> out;
  const std::regex long_option("--([a-z0-9][a-z0-9-]*)");
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i] != ".TP") continue;
    ManEntry entry{lines[i + 1], ""};
    for (size_t j = i + 2; j < lines.size() && lines[j] != ".TP"; ++j)
      entry.text += lines[j] + "\n";
    for (std::sregex_iterator m(entry.tag.begin(), entry.tag.end(), long_option), end; m != end;
         ++m)
      out[(*m)[1]] = entry;
  }
  return out;
}

// The short forms a tag names ("-c" in ".BR -c \", \" --config").
std::set<char> short_forms(const std::string &tag) {
  std::set<char> out;
  const std::regex short_option(R"((^|[ "])-([A-Za-z])(?=[ ",]|$))");
  for (std::sregex_iterator m(tag.begin(), tag.end(), short_option), end; m != end; ++m)
    out.insert((*m)[2].str()[0]);
  return out;
}

// CONFIGURATION's list of keys: the .BR lines after "The keys are".
std::set<std::string> man_config_keys() {
  std::set<std::string> out;
  bool in = false;
  for (const std::string &line : man_section("CONFIGURATION")) {
    if (line.find("The keys are") != std::string::npos) {
      in = true;
    } else if (in && line.rfind(".BR ", 0) == 0) {
      out.insert(line.substr(4, line.find(' ', 4) - 4));
    } else if (in) {
      break;
    }
  }
  return out;
}

// The sample's "#key = value" lines: each key's first value.
std::map<std::string, std::string> sample_values() {
  std::map<std::string, std::string> out;
  const std::regex sample_line("#([a-z][a-z0-9-]*) = (.*)");
  std::smatch m;
  for (const std::string &line : read_lines(RPMEM_SAMPLE_CONFIG)) {
    if (std::regex_match(line, m, sample_line)) out.emplace(m[1], m[2]);
  }
  return out;
}

std::set<std::string> table_names(bool files_only) {
  std::set<std::string> out;
  for (const Option &row : options()) {
    if (row.in_file || !files_only) out.insert(row.name);
  }
  return out;
}

// Whether `text` has `word` with no letter, digit or '-' on either side.
bool has_word(const std::string &text, const std::string &word) {
  auto edge = [](char c) { return !std::isalnum(static_cast<unsigned char>(c)) && c != '-'; };
  for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
    size_t end = pos + word.size();
    if ((pos == 0 || edge(text[pos - 1])) && (end == text.size() || edge(text[end]))) return true;
  }
  return false;
}

TEST(OptionTableTest, NamesAndShortFormsAreUniqueAndFlagsTakeNoValue) {
  std::set<std::string> names;
  std::set<char> shorts;
  for (const Option &row : options()) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    if (row.short_name) {
      EXPECT_TRUE(shorts.insert(row.short_name).second) << row.name;
    }
    EXPECT_EQ(row.kind == Option::Kind::kFlag, *row.arg == '\0') << row.name;
    EXPECT_NE(*row.help, '\0') << row.name;
    EXPECT_LE(row.lo, row.hi) << row.name;
  }
  EXPECT_EQ(names.size(), options().size());
}

TEST(OptionTableTest, EveryDefaultIsAValueOfItsOwnKey) {
  ConfigEnv env;
  env.home = "/h";
  for (const Option &row : options()) {
    if (!row.fallback) continue;
    EXPECT_TRUE(row.in_file) << row.name << ": a default of the command line only";
    Config c = default_config(env);
    EXPECT_NO_THROW(parse_config_text(std::string(row.name) + " = " + row.fallback, "t", env, c))
        << row.name;
  }
}

TEST(OptionTableTest, HelpShowsEveryOptionWithItsDefault) {
  const std::string text = usage_text("rpmemd");
  for (const Option &row : options()) {
    std::string option = "--" + std::string(row.name) + (*row.arg ? " " : "") + row.arg;
    if (row.short_name) option = std::string{'-', row.short_name, ',', ' '} + option;
    EXPECT_THAT(text, HasSubstr("  " + option)) << row.name;
    if (row.fallback) {
      EXPECT_TRUE(has_word(text, row.fallback)) << row.name;
    }
  }
}

TEST(OptionDocsTest, ManPageOptionsAreTheTable) {
  std::map<std::string, ManEntry> man = man_options();
  std::set<std::string> names;
  for (const auto &[name, entry] : man) names.insert(name);
  EXPECT_THAT(names, ContainerEq(table_names(false))) << RPMEM_MAN_PAGE << ": OPTIONS";
  for (const Option &row : options()) {
    auto it = man.find(row.name);
    if (it == man.end()) continue;
    std::set<char> expected;
    if (row.short_name) expected.insert(row.short_name);
    EXPECT_THAT(short_forms(it->second.tag), ContainerEq(expected)) << it->second.tag;
  }
}

// Flags aside (yes or no, which any text has), an option's entry says its
// default.
TEST(OptionDocsTest, ManPageStatesTheDefaults) {
  std::map<std::string, ManEntry> man = man_options();
  for (const Option &row : options()) {
    auto it = man.find(row.name);
    if (!row.fallback || row.kind == Option::Kind::kFlag || it == man.end()) continue;
    const std::string &text = it->second.text;
    EXPECT_TRUE(has_word(text, row.fallback)) << row.name << " " << row.fallback << ":\n" << text;
    EXPECT_TRUE(text.find("default") != std::string::npos ||
                text.find("Default") != std::string::npos)
        << row.name << ":\n"
        << text;
  }
}

TEST(OptionDocsTest, ManPageConfigKeysAreTheFileKeys) {
  EXPECT_THAT(man_config_keys(), ContainerEq(table_names(true)))
      << RPMEM_MAN_PAGE << ": CONFIGURATION";
}

TEST(OptionDocsTest, SampleConfigKeysAreTheFileKeys) {
  std::set<std::string> keys;
  for (const auto &[key, value] : sample_values()) keys.insert(key);
  EXPECT_THAT(keys, ContainerEq(table_names(true))) << RPMEM_SAMPLE_CONFIG;
}

// "the values shown are the defaults": a key's first line, where it has one.
TEST(OptionDocsTest, SampleConfigShowsTheDefaults) {
  std::map<std::string, std::string> sample = sample_values();
  for (const Option &row : options()) {
    auto it = sample.find(row.name);
    if (row.fallback && it != sample.end()) {
      EXPECT_EQ(it->second, row.fallback) << row.name;
    }
  }
}

}  // namespace
}  // namespace rpmemd
