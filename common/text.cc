// SPDX-License-Identifier: BSD-3-Clause
// Escaping of control characters; the words of a timed-out wait.
#include "common/text.h"

namespace rpmem {

std::string escape_control(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (!is_control(c)) {
      out += c;
      continue;
    }
    out += '\\';
    switch (c) {
      case '\n':
        out += 'n';
        break;
      case '\r':
        out += 'r';
        break;
      case '\t':
        out += 't';
        break;
      default: {
        auto u = static_cast<unsigned char>(c);
        out += 'x';
        out += kHex[u >> 4];
        out += kHex[u & 0xf];
      }
    }
  }
  return out;
}

std::string no_answer_text(std::chrono::milliseconds waited) {
  const long long ms = waited.count();
  return "no answer from the target for " +
         (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms");
}

}  // namespace rpmem
