// SPDX-License-Identifier: BSD-3-Clause
// What a session's data lanes run in -- cleartext, TLS or sealed -- from the
// daemon's data-tls and data-seal and what the client can and asks; a pure
// function, unit tested without sockets. The client decides its side from
// the response (librpmem/pool.cc), the mirror of this.
#ifndef RPMEMD_LANE_SECURITY_H
#define RPMEMD_LANE_SECURITY_H

#include "common/proto.h"
#include "rpmemd/config.h"

#include <string>

namespace rpmemd {

struct LaneSecurity {
  rpmem::proto::Status status = rpmem::proto::Status::kSuccess;  // else refused
  std::string why;                                               // the refusal, for the log
  bool tls = false;     // the lanes run inside TLS (or sealed: a kind of TLS lanes)
  bool sealed = false;  // sealed lanes (AES-GCM frames) rather than TLS
  // The response's lane flags.
  uint32_t lane_flags() const noexcept {
    return sealed ? rpmem::proto::kLaneTls | rpmem::proto::kLaneSealed
           : tls  ? rpmem::proto::kLaneTls
                  : 0;
  }
};

// policy: data-tls; seal: data-seal; minor and lane_flags: the client's
// protocol and what it asks for. A client of protocol 1.3 or later reads the
// answer in the response's extension; an older one gets none and cannot
// have TLS lanes.
LaneSecurity choose_lane_security(DataTls policy, bool seal, uint16_t minor, uint32_t lane_flags);

}  // namespace rpmemd

#endif  // RPMEMD_LANE_SECURITY_H
