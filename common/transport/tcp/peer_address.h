// SPDX-License-Identifier: BSD-3-Clause
// A peer's address as text, as the tcp target logs it and compares it with
// the session's control peer.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_PEER_ADDRESS_H
#define RPMEM_COMMON_TRANSPORT_TCP_PEER_ADDRESS_H

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace rpmem::transport::tcp {

// The numeric address, an IPv4-mapped IPv6 address as IPv4; "?" for
// another family.
std::string numeric_address(const sockaddr_storage &ss);
uint16_t port_of(const sockaddr_storage &ss);
// A numeric address (IPv6 maybe in brackets) in the form numeric_address()
// gives; anything else as it is.
std::string normalized(const std::string &address);

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_PEER_ADDRESS_H
