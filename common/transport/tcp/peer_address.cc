// SPDX-License-Identifier: BSD-3-Clause
// A peer's address as text (peer_address.h).
#include "common/transport/tcp/peer_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace rpmem::transport::tcp {

// The address of a peer as text, an IPv4-mapped IPv6 address as IPv4.
std::string numeric_address(const sockaddr_storage &ss) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in &>(ss).sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    const auto &a6 = reinterpret_cast<const sockaddr_in6 &>(ss).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6))
      ::inet_ntop(AF_INET, a6.s6_addr + 12, buf, sizeof(buf));
    else
      ::inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
  }
  return buf;
}

uint16_t port_of(const sockaddr_storage &ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in &>(ss).sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6 &>(ss).sin6_port);
  return 0;
}

std::string normalized(const std::string &address) {
  if (address.empty()) return address;
  sockaddr_storage ss{};
  std::string bare = address;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']')
    bare = bare.substr(1, bare.size() - 2);
  if (::inet_pton(AF_INET, bare.c_str(), &reinterpret_cast<sockaddr_in &>(ss).sin_addr) == 1) {
    ss.ss_family = AF_INET;
  } else if (::inet_pton(AF_INET6, bare.c_str(), &reinterpret_cast<sockaddr_in6 &>(ss).sin6_addr) ==
             1) {
    ss.ss_family = AF_INET6;
  } else {
    return address;
  }
  return numeric_address(ss);
}

}  // namespace rpmem::transport::tcp
