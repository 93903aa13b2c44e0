// SPDX-License-Identifier: BSD-3-Clause
// choose_lane_security: how the client secures its data lanes, from what it
// offered and what the target granted (the lane flags of the pool request
// and of its response). A pure function: no I/O, no keys; the caller then
// keys the lanes the chosen way. rpmemd's session decides the grant; this
// is the client's check of it.
// Errors: EPROTO with a message, for a grant the client cannot take.
#ifndef RPMEM_LIBRPMEM_LANE_SECURITY_H
#define RPMEM_LIBRPMEM_LANE_SECURITY_H

#include "common/error.h"
#include "common/proto.h"

#include <cstdint>

namespace rpmem {

enum class LaneSecurity {
  kCleartext,        // plain tcp (or verbs) lanes
  kSealed,           // AES-GCM frames, keyed from the control channel
  kTlsCertificates,  // TLS lanes with the control channel's certificates (rpmems://)
  kTlsSessionKey,    // TLS lanes with the session's PSK from the ssh channel
};

// `offered`: the request's lane flags (kLaneTls when RPMEM_DATA_TLS=1, with
// kLaneSealed when the client can seal); `granted`: the response's;
// `transport`: the lanes' transport; `service`: an rpmems:// target.
Result<LaneSecurity> choose_lane_security(uint32_t offered, uint32_t granted,
                                          proto::TransportKind transport, bool service);

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_LANE_SECURITY_H
