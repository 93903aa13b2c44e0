// SPDX-License-Identifier: BSD-3-Clause
// Parsing of target strings.
#include "librpmem/target_address.h"

#include "common/text.h"

#include <algorithm>

namespace rpmem {
namespace {

// Why `part` (the user or the host) may not reach ssh, or nullptr.
const char *unsafe_part(const std::string &part) {
  if (!part.empty() && part.front() == '-') return "begins with '-'";
  for (char c : part) {
    if (c == ' ') return "holds whitespace";
    if (is_control(c))
      return c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
                 ? "holds whitespace"
                 : "holds a control character";
  }
  return nullptr;
}

}  // namespace

std::string TargetAddress::ssh_destination() const {
  return user.empty() ? host : user + "@" + host;
}

Result<TargetAddress> parse_target(std::string_view target) {
  auto t = split_target(target);
  if (!t) return t;
  for (const auto &[what, part] : {std::pair{"user", &t->user}, std::pair{"host", &t->host}}) {
    if (const char *why = unsafe_part(*part))
      return Error{errc(EINVAL), "invalid target '" + escape_control(target) + "': " + what + " '" +
                                     escape_control(*part) + "' " + why};
  }
  return t;
}

Result<TargetAddress> split_target(std::string_view target) {
  TargetAddress t;
  std::string_view rest = target;
  if (rest.substr(0, kServiceScheme.size()) == kServiceScheme) {
    t.service = true;
    rest.remove_prefix(kServiceScheme.size());
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  }
  if (auto at = rest.find('@'); at != std::string_view::npos) {
    t.user = std::string(rest.substr(0, at));
    rest.remove_prefix(at + 1);
  }
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos)
      return Error{errc(EINVAL), "invalid target '" + escape_control(target) + "': missing ']'"};
    t.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return Error{errc(EINVAL), "invalid target '" + escape_control(target) + "'"};
      t.port = std::string(rest.substr(1));
    }
  } else if (std::count(rest.begin(), rest.end(), ':') == 1) {
    auto colon = rest.find(':');
    t.host = std::string(rest.substr(0, colon));
    t.port = std::string(rest.substr(colon + 1));
  } else {
    t.host = std::string(rest);
  }
  if (t.host.empty())
    return Error{errc(EINVAL), "invalid target '" + escape_control(target) + "': empty host"};
  return t;
}

Result<uint16_t> port_number(const std::string &port) {
  // As PMDK's strtol: decimal digits, leading zeros allowed, a sign only
  // for "must be positive".
  size_t digits_from = (!port.empty() && (port[0] == '-' || port[0] == '+')) ? 1 : 0;
  if (port.size() == digits_from ||
      port.find_first_not_of("0123456789", digits_from) != std::string::npos)
    return Error{errc(EINVAL), "invalid port number -- '" + port + "'"};
  size_t first = port.find_first_not_of('0', digits_from);
  if (port[0] == '-' || first == std::string::npos)
    return Error{errc(EINVAL), "port number must be positive"};
  if (port.size() - first > 5 || std::stoul(port.substr(first)) > 65535)
    return Error{errc(EINVAL), "port number too large"};
  return static_cast<uint16_t>(std::stoul(port.substr(first)));
}

}  // namespace rpmem
