// SPDX-License-Identifier: BSD-3-Clause
// Dispatch from a transport kind to its provider.
#include "common/transport/transport.h"

#include "common/transport/tcp/tcp_initiator.h"
#include "common/transport/tcp/tcp_target.h"
#ifdef RPMEM_HAVE_VERBS
#include "common/transport/verbs/verbs_initiator.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_target.h"
#endif

namespace rpmem::transport {

LaneRoute::~LaneRoute() {
  volatile uint8_t *p = where_.master.data();
  for (size_t i = 0; i < where_.master.size(); ++i) p[i] = 0;
  volatile uint8_t *q = where_.secret.data();
  for (size_t i = 0; i < where_.secret.size(); ++i) q[i] = 0;
}

const char *TargetPool::refusal(uint64_t offset, uint64_t length, bool writes) const noexcept {
  if (length > size() || offset > size() - length) return "range outside the pool";
  if (writes && length > 0 && offset < writable_from()) return "write into the pool header";
  return nullptr;
}

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(TransportKind kind,
                                                                  const InitiatorParams &params) {
  if (kind == TransportKind::kTcp) return tcp::connect_lanes(params);
#ifdef RPMEM_HAVE_VERBS
  if (kind == TransportKind::kVerbs) return verbs::connect_lanes(params);
#endif
  return Error{errc(EMEDIUMTYPE), "transport not supported by this build"};
}

std::unique_ptr<Target> make_target(TransportKind kind, TargetPool &pool,
                                    const TargetParams &params) {
  if (kind == TransportKind::kTcp) return std::make_unique<tcp::TcpTarget>(pool, params);
#ifdef RPMEM_HAVE_VERBS
  if (kind == TransportKind::kVerbs) return std::make_unique<verbs::VerbsTarget>(pool, params);
#endif
  throw SetupError(EMEDIUMTYPE, "transport not supported by this build");
}

uint32_t available_transports() {
  uint32_t t = proto::transport_bit(TransportKind::kTcp);
#ifdef RPMEM_HAVE_VERBS
  if (verbs::device_present()) t |= proto::transport_bit(TransportKind::kVerbs);
#endif
  return t;
}

}  // namespace rpmem::transport
