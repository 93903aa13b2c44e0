// SPDX-License-Identifier: BSD-3-Clause
// Dispatch from a transport kind to its provider.
#include "common/transport/transport.h"

#include "common/transport/tcp/tcp_initiator.h"
#include "common/transport/tcp/tcp_target.h"

namespace rpmem::transport {

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(TransportKind kind,
                                                                  const InitiatorParams &params) {
  if (kind == TransportKind::kTcp) return tcp::connect_lanes(params);
  return Error{errc(EMEDIUMTYPE), "transport not supported by this build"};
}

std::unique_ptr<Target> make_target(TransportKind kind, TargetPool &pool,
                                    const TargetParams &params) {
  if (kind == TransportKind::kTcp) return std::make_unique<tcp::TcpTarget>(pool, params);
  throw SetupError(EMEDIUMTYPE, "transport not supported by this build");
}

uint32_t available_transports() { return proto::transport_bit(TransportKind::kTcp); }

}  // namespace rpmem::transport
