// SPDX-License-Identifier: BSD-3-Clause
// The library's environment table (rpmem::variables()) and librpmem(7)'s
// ENVIRONMENT, held to each other both ways: every variable of the table
// has an entry that opens with its summary and says "Default: " its
// default, every variable an entry names is in the table; and the table
// itself is sound (its defaults are those of Settings).
#include "librpmem/settings.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace rpmem {
namespace {

// A troff line as text: "\-" is '-', font changes go, a font request is
// its words (".B a b": "a b"; ".BR a b", alternating fonts: "ab").
std::string plain(std::string line) {
  line = std::regex_replace(line, std::regex(R"(\\-)"), "-");
  line = std::regex_replace(line, std::regex(R"(\\f[BIRP])"), "");
  line = std::regex_replace(line, std::regex(R"(\\\(en)"), "-");
  std::smatch m;
  if (!std::regex_match(line, m, std::regex(R"(\.([BIR]{1,2})(?: (.*))?)"))) return line;
  const std::string sep = m[1].length() == 1 ? " " : "";
  const std::string args = m[2];
  std::string out;
  const std::regex arg(R"re("([^"]*)"|(\S+))re");
  for (std::sregex_iterator a(args.begin(), args.end(), arg), end; a != end; ++a)
    out += (out.empty() ? "" : sep) + ((*a)[1].matched ? (*a)[1].str() : (*a)[2].str());
  return out;
}

// ENVIRONMENT's entries by the variables their tags name: its text, the
// lines joined with spaces.
std::map<std::string, std::string> man_entries() {
  std::ifstream in(RPMEM_LIB_MAN_PAGE);
  EXPECT_TRUE(in) << RPMEM_LIB_MAN_PAGE;
  std::vector<std::string> lines;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(".SH", 0) == 0) {
      inside = line == ".SH ENVIRONMENT";
      continue;
    }
    if (inside) lines.push_back(line);
  }
  std::map<std::string, std::string> out;
  const std::regex name("RPMEM_[A-Z_]+");
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i] != ".TP") continue;
    const std::string tag = lines[i + 1];
    std::string text;
    for (size_t j = i + 2; j < lines.size() && lines[j] != ".TP"; ++j) {
      const std::string p = plain(lines[j]);
      if (!p.empty()) text += (text.empty() ? "" : " ") + p;
    }
    for (std::sregex_iterator m(tag.begin(), tag.end(), name), end; m != end; ++m)
      out[m->str()] = text;
  }
  return out;
}

TEST(EnvironmentDoc, EveryVariableOfTheTableIsInLibrpmem7WithItsDefault) {
  const auto entries = man_entries();
  for (const Variable &v : variables()) {
    auto it = entries.find(v.name);
    ASSERT_NE(it, entries.end()) << v.name << " is not in librpmem(7)'s ENVIRONMENT";
    EXPECT_EQ(it->second.rfind(v.summary, 0), 0u)
        << v.name << ": librpmem(7) does not open with \"" << v.summary << "\":\n"
        << it->second;
    EXPECT_NE(it->second.find(std::string("Default: ") + v.fallback + "."), std::string::npos)
        << v.name << ": librpmem(7) does not say \"Default: " << v.fallback << ".\":\n"
        << it->second;
  }
}

TEST(EnvironmentDoc, EveryVariableOfLibrpmem7IsInTheTable) {
  std::set<std::string> table;
  for (const Variable &v : variables()) table.insert(v.name);
  for (const auto &[name, text] : man_entries())
    EXPECT_TRUE(table.count(name)) << name << " is in librpmem(7) but not in the table";
  EXPECT_GE(man_entries().size(), 10u) << "the man page's entries were not found";
}

// A default that is a value (not "none", "standard error" or another
// variable's value) is what the row's reader makes of it: Settings' own
// default.
TEST(EnvironmentDoc, TheTablesDefaultsAreThoseOfSettings) {
  std::set<std::string> names;
  for (const Variable &v : variables()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " twice";
    // "none", and a default that is the value of another variable.
    if (v.once || std::string(v.fallback) == "none" || v.fallback[0] == '$') continue;
    Settings s;
    EXPECT_TRUE(v.read(v, v.fallback, s)) << v.name;
    EXPECT_TRUE(s == Settings{}) << v.name << "'s default " << v.fallback << " is not Settings'";
  }
}

}  // namespace
}  // namespace rpmem
