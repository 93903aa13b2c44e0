// SPDX-License-Identifier: BSD-3-Clause
// TargetAddress: "[user@]host[:port]" as PMDK parsed it; IPv6 hosts in
// brackets ("user@[::1]:22"); a bare host with two or more colons is an
// IPv6 address without a port. The port is the ssh port.
#ifndef RPMEM_LIBRPMEM_TARGET_ADDRESS_H
#define RPMEM_LIBRPMEM_TARGET_ADDRESS_H

#include "common/error.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace rpmem {

inline constexpr uint16_t kServicePort = 7636;
inline constexpr std::string_view kServiceScheme = "rpmems://";

struct TargetAddress {
  bool service = false;  // rpmems://
  std::string user;      // empty: none given
  std::string host;      // brackets stripped
  std::string port;      // empty: none given; validated by port_number()

  // "user@host" for ssh, brackets stripped.
  std::string ssh_destination() const;
};

// EINVAL for an empty host or a missing ']', and for a user or host that
// begins with '-' or holds whitespace or a control character (ssh would take
// it for an option, or it is no name at all); the message names the part and
// the problem, with control characters escaped.
Result<TargetAddress> parse_target(std::string_view target);

// The split alone, without the checks of the user and host (for tests).
Result<TargetAddress> split_target(std::string_view target);

// The port as a number: EINVAL with PMDK's messages "invalid port number --
// 'x'", "port number must be positive", "port number too large".
Result<uint16_t> port_number(const std::string &port);

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_TARGET_ADDRESS_H
