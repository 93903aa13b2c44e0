// SPDX-License-Identifier: BSD-3-Clause
// Parser of poolset(5) text and the net pool size of a parsed set.
#include "rpmemd/poolset.h"

#include "common/pool_attr.h"

#include <array>
#include <cerrno>
#include <limits>
#include <utility>

namespace rpmemd {
namespace {

using rpmem::errc;
using rpmem::Error;

constexpr std::string_view kSignature = "PMEMPOOLSET";
constexpr uint64_t kPageSize = 4096;

struct Suffix {
  std::string_view name;
  uint64_t magnitude;
};

// The exact table of PMDK's util_parse_size (note "kB", not "KB").
constexpr std::array<Suffix, 16> kSuffixes = {{
    {"B", 1},
    {"K", 1ULL << 10},
    {"M", 1ULL << 20},
    {"G", 1ULL << 30},
    {"T", 1ULL << 40},
    {"P", 1ULL << 50},
    {"KiB", 1ULL << 10},
    {"MiB", 1ULL << 20},
    {"GiB", 1ULL << 30},
    {"TiB", 1ULL << 40},
    {"PiB", 1ULL << 50},
    {"kB", 1000ULL},
    {"MB", 1000ULL * 1000},
    {"GB", 1000ULL * 1000 * 1000},
    {"TB", 1000ULL * 1000 * 1000 * 1000},
    {"PB", 1000ULL * 1000 * 1000 * 1000 * 1000},
}};

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_space(char c) { return is_blank(c) || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

// Splits on spaces and tabs.
std::vector<std::string_view> tokens_of(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

Error line_error(size_t lineno, std::string_view what) {
  return Error{errc(EINVAL), "pool set line " + std::to_string(lineno) + ": " + std::string(what)};
}

}  // namespace

size_t PoolSet::header_count() const noexcept {
  if (no_hdrs) return 0;
  if (single_hdr) return 1;
  return parts.size();
}

uint64_t PoolSet::later_part_map_offset() const noexcept {
  return (single_hdr || no_hdrs) ? 0 : rpmem::kPoolHdrSize;
}

rpmem::Result<uint64_t> parse_poolset_size(std::string_view token) {
  size_t digits = 0;
  while (digits < token.size() && token[digits] >= '0' && token[digits] <= '9') ++digits;
  if (digits == 0) return Error{errc(EINVAL), "incorrect format of size"};
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    auto d = static_cast<uint64_t>(token[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - d) / 10)
      return Error{errc(EINVAL), "size out of range"};
    value = value * 10 + d;
  }
  std::string_view unit = token.substr(digits);
  if (!unit.empty()) {
    const Suffix *found = nullptr;
    for (const auto &s : kSuffixes)
      if (s.name == unit) found = &s;
    if (found == nullptr) return Error{errc(EINVAL), "unknown size suffix"};
    if (value > std::numeric_limits<uint64_t>::max() / found->magnitude)
      return Error{errc(EINVAL), "size out of range"};
    value *= found->magnitude;
  }
  if (value == 0) return Error{errc(EINVAL), "size must not be zero"};
  return value;
}

rpmem::Result<PoolSet> parse_poolset(std::string_view text) {
  constexpr uint64_t kMaxTotal = std::numeric_limits<int64_t>::max();
  PoolSet set;
  uint64_t total = 0;
  size_t lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;

    if (line.find('\0') != std::string_view::npos) return line_error(lineno, "NUL byte");
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);

    if (lineno == 1) {
      // PMDK: the first line must be exactly the signature (a trailing
      // comment or whitespace aside).
      if (line != kSignature)
        return line_error(lineno, "the first line must be exactly 'PMEMPOOLSET'");
      continue;
    }
    std::vector<std::string_view> tok = tokens_of(line);
    if (tok.empty()) continue;

    if (tok[0] == "REPLICA")
      return line_error(lineno, "REPLICA is not allowed in a remote pool set (one replica only)");
    if (tok[0] == "OPTION") {
      if (tok.size() < 2) return line_error(lineno, "OPTION without a name");
      for (size_t i = 1; i < tok.size(); ++i) {
        if (tok[i] == "SINGLEHDR") {
          set.single_hdr = true;
        } else if (tok[i] == "NOHDRS") {
          set.no_hdrs = true;
        } else {
          return line_error(lineno, "unknown option '" + std::string(tok[i]) + "'");
        }
      }
      if (set.single_hdr && set.no_hdrs)
        return line_error(lineno, "options SINGLEHDR and NOHDRS are mutually exclusive");
      continue;
    }
    if (tok.size() != 2) return line_error(lineno, "size and path expected");
    if (tok[1].front() != '/')
      return line_error(lineno, "incorrect path (must be an absolute one)");
    if (tok[0] == "AUTO") {  // a device DAX's own size, resolved when it is opened
      set.parts.push_back(PoolSetPart{0, std::string(tok[1]), std::nullopt});
      continue;
    }
    auto size = parse_poolset_size(tok[0]);
    if (!size) return line_error(lineno, size.error().message);
    if (*size < rpmem::kMinPart)
      return line_error(lineno, "part size " + std::to_string(*size) + " is smaller than " +
                                    std::to_string(rpmem::kMinPart));
    // Sizes become off_t and one mapping: keep every size and the total
    // within int64_t so nothing downstream can overflow.
    if (*size > kMaxTotal - total) return line_error(lineno, "pool set too large");
    total += *size;
    set.parts.push_back(PoolSetPart{*size, std::string(tok[1]), std::nullopt});
  }
  if (lineno == 0) return line_error(1, "the first line must be exactly 'PMEMPOOLSET'");
  if (set.parts.empty()) return Error{errc(EINVAL), "no pool set parts"};
  return set;
}

uint64_t poolset_net_size(const PoolSet &set) noexcept {
  uint64_t sum = 0;
  for (const auto &p : set.parts) sum += p.size & ~(kPageSize - 1);
  size_t headers = set.header_count();
  if (headers > 1) sum -= kPageSize * (headers - 1);
  return sum;
}

}  // namespace rpmemd
