// SPDX-License-Identifier: BSD-3-Clause
// choose_lane_security: the client's decision on its data lanes' security.
#include "librpmem/lane_security.h"

namespace rpmem {

Result<LaneSecurity> choose_lane_security(uint32_t offered, uint32_t granted,
                                          proto::TransportKind transport, bool service) {
  const bool lane_tls = (granted & proto::kLaneTls) != 0;
  const bool sealed = lane_tls && (granted & proto::kLaneSealed) != 0;
  if (lane_tls && transport != proto::TransportKind::kTcp)
    return Error{errc(EPROTO), "TLS data lanes over a transport other than tcp"};
  if (sealed && !(offered & proto::kLaneSealed))
    return Error{errc(EPROTO), "the target sealed the data lanes, which this client did not offer"};
  if (sealed) return LaneSecurity::kSealed;
  if (lane_tls) return service ? LaneSecurity::kTlsCertificates : LaneSecurity::kTlsSessionKey;
  // RPMEM_DATA_TLS=1 asks for TLS lanes: cleartext ones are refused.
  if (offered & proto::kLaneTls)
    return Error{errc(EPROTO),
                 "the target did not put the data lanes inside TLS (RPMEM_DATA_TLS=1)"};
  return LaneSecurity::kCleartext;
}

}  // namespace rpmem
