// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, client side: one RC queue pair per lane, the local pool
// registered once (shared by the lanes, never touched on the data path).
//   persist, relaxed: RDMA WRITE, then the persist method (GPSPM: a SEND
//     asking the target to flush the range and its reply; APM: an 8-byte
//     RDMA READ that the target's CPU never sees).
//   persist, flags 0; deep persist: the bytes travel inline in SENDs that
//     the target copies with whole-word stores and flushes (8-byte failure
//     atomicity, as PMDK did), up to ProviderInfo::max_inline per round trip.
//   flush: an unsignalled RDMA WRITE, with or without RPMEM_FLUSH_RELAXED
//     (SPEC.md promises atomicity for persist only; PMDK made a flush with
//     flags 0 a synchronous inline persist); every work_queue_size-th WRITE
//     is signalled and waited for, which bounds the send queue.
//   drain: GPSPM one round trip carrying the flushed ranges; APM one READ.
//   read: RDMA READs into a registered lane buffer, copied out.
// Every wait is bounded by InitiatorParams::timeout; a QP error, an
// rdma_cm disconnect or the timeout make the lane dead (ECONNRESET).
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_INITIATOR_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_INITIATOR_H

#include "common/transport/transport.h"

#include <memory>
#include <vector>

namespace rpmem::transport::verbs {

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(const InitiatorParams &params);

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_INITIATOR_H
