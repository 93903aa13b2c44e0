// SPDX-License-Identifier: BSD-3-Clause
// Text from the network, a file or the environment made safe to print, and
// the words every timed-out wait says.
#ifndef RPMEM_COMMON_TEXT_H
#define RPMEM_COMMON_TEXT_H

#include <chrono>
#include <string>
#include <string_view>

namespace rpmem {

// True for the bytes escape_control() rewrites: 0x00..0x1f and 0x7f.
inline bool is_control(char c) {
  auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

// `s` with every control byte written as an escape: "\n", "\r", "\t", and
// "\xNN" (two lower-case hex digits) for the others. Every other byte,
// backslashes and bytes >= 0x80 included, is kept as it is. The result holds
// no control byte, so it can never start a new log line.
std::string escape_control(std::string_view s);

// "no answer from the target for 20 s" ("... for 1500 ms" when `waited` is
// not whole seconds): what a wait for the target that ran out says.
std::string no_answer_text(std::chrono::milliseconds waited);

}  // namespace rpmem

#endif  // RPMEM_COMMON_TEXT_H
