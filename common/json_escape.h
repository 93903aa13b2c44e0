// SPDX-License-Identifier: BSD-3-Clause
// A string's characters as the inside of a JSON string: quote and
// backslash escaped, control characters as \uXXXX. Header-only, so that
// tools linked with the public library alone can use it too.
#ifndef RPMEM_COMMON_JSON_ESCAPE_H
#define RPMEM_COMMON_JSON_ESCAPE_H

#include <cstdio>
#include <string>

namespace rpmem {

inline std::string json_escape(const std::string &s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      o += '\\';
      o += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(ch));
      o += buf;
    } else {
      o += ch;
    }
  }
  return o;
}

}  // namespace rpmem

#endif  // RPMEM_COMMON_JSON_ESCAPE_H
