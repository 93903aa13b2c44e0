// SPDX-License-Identifier: BSD-3-Clause
// A checker of Prometheus' text exposition format (version 0.0.4), for the
// tests: every line a # HELP, a # TYPE or a sample; metric and label names
// as the format allows; label values quoted with only \\, \" and \n
// escaped; values that parse; every sample's family declared by a TYPE
// before it, each family declared once; counters' names end in _total;
// a histogram's buckets cumulative, ending with le="+Inf" equal to _count,
// with a _sum. Returns the first problem, or "" when there is none; the
// samples go to `values` ("name{labels}" -> value) when given.
#ifndef RPMEM_TESTS_PROM_CHECK_H
#define RPMEM_TESTS_PROM_CHECK_H

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace rpmem_test {

inline bool prom_name(const std::string &n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
  return true;
}

inline std::string prom_check(const std::string &text,
                              std::map<std::string, double> *values = nullptr) {
  std::map<std::string, std::string> type;  // family -> type
  std::set<std::string> helped;
  std::map<std::string, double> last_bucket, count;
  std::set<std::string> has_sum;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  if (!text.empty() && text.back() != '\n') return "the text does not end with a newline";
  while (std::getline(in, line)) {
    ++n;
    const std::string at = "line " + std::to_string(n) + " '" + line + "': ";
    if (line.empty()) return at + "empty line";
    if (line[0] == '#') {
      std::istringstream w(line);
      std::string hash, kind, name, rest;
      w >> hash >> kind >> name;
      std::getline(w, rest);
      if (hash != "#" || (kind != "HELP" && kind != "TYPE"))
        return at + "a comment of neither kind";
      if (!prom_name(name)) return at + "bad metric name";
      if (kind == "HELP") {
        if (!helped.insert(name).second) return at + "HELP twice";
        continue;
      }
      if (type.count(name)) return at + "TYPE twice";
      const std::string t = rest.empty() ? "" : rest.substr(1);
      if (t != "counter" && t != "gauge" && t != "histogram" && t != "summary" && t != "untyped")
        return at + "bad type";
      if (t == "counter" && (name.size() < 6 || name.substr(name.size() - 6) != "_total"))
        return at + "a counter's name must end in _total";
      type[name] = t;
      continue;
    }
    // name{labels} value
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (!prom_name(name)) return at + "bad metric name";
    std::string labels, le;
    if (i < line.size() && line[i] == '{') {
      const size_t start = i;
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return at + "label without =";
        const std::string lname = line.substr(i, eq - i);
        if (!prom_name(lname) || lname.find(':') != std::string::npos) return at + "bad label name";
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return at + "label value not quoted";
        std::string value;
        for (++i; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\') {
            ++i;
            if (i >= line.size() || (line[i] != '\\' && line[i] != '"' && line[i] != 'n'))
              return at + "bad escape in a label value";
          }
          value += line[i];
        }
        if (i >= line.size()) return at + "unterminated label value";
        ++i;
        if (lname == "le") le = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return at + "unterminated labels";
      labels = line.substr(start, i + 1 - start);
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') return at + "no value";
    const std::string v = line.substr(i + 1);
    char *end = nullptr;
    const double value = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') return at + "bad value";
    std::string family = name;
    for (const char *suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.substr(name.size() - s.size()) == s &&
          type.count(name.substr(0, name.size() - s.size())) &&
          type[name.substr(0, name.size() - s.size())] == "histogram")
        family = name.substr(0, name.size() - s.size());
    }
    if (!type.count(family)) return at + "no TYPE before the sample";
    if (type[family] == "histogram") {
      if (name == family + "_bucket") {
        if (le.empty()) return at + "a bucket without le";
        if (last_bucket.count(family) && value < last_bucket[family])
          return at + "buckets not cumulative";
        last_bucket[family] = value;
        if (le == "+Inf") count[family] = value;
      } else if (name == family + "_count") {
        if (!count.count(family) || count[family] != value)
          return at + "_count is not the +Inf bucket";
      } else if (name == family + "_sum") {
        has_sum.insert(family);
      } else {
        return at + "a histogram sample that is no bucket, sum or count";
      }
    }
    if (values) (*values)[name + labels] = value;
  }
  for (const auto &[family, t] : type)
    if (t == "histogram" && (!count.count(family) || !has_sum.count(family)))
      return "histogram " + family + " without +Inf bucket, _count or _sum";
  return "";
}

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_PROM_CHECK_H
