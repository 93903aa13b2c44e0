// SPDX-License-Identifier: BSD-3-Clause
// The lines a session logs in PMDK's rpmemd's words and order: the pool
// attributes, the persistency policy and the response block of an open or
// create (tests compare them with PMDK's).
#ifndef RPMEMD_SESSION_LOG_H
#define RPMEMD_SESSION_LOG_H

#include "common/pool_attr.h"
#include "common/proto.h"
#include "common/transport/persister.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace rpmemd {

// The transports in bit mask `t`, by name: "verbs", "tcp", "verbs, tcp".
std::string provider_names(uint32_t t);

// The lines under "pool attributes:"; nullptr (no headers) is "NULL".
void log_pool_attr(const rpmem::PoolAttr *attr);

// "persistency policy:" and its lines. data_path: where RDMA writes land
// (verbs only); durability: the session's levels (durability_text()).
void log_policy(rpmem::proto::TransportKind kind, bool apm,
                const rpmem::transport::MediumTraits &medium, const std::string &data_path,
                const std::string &durability);
// What the policy's "durability:" line says: the pool's level, what it is
// on `medium`, and whether visible calls are granted (`visible`).
std::string durability_text(rpmem::proto::Durability pool, bool visible,
                            const rpmem::transport::MediumTraits &medium,
                            std::chrono::milliseconds write_back);

// The response block of a request that succeeded; the session secret takes
// the place of the rkey and is not logged. Cleartext lanes log as PMDK did
// (no line); sealed and TLS lanes say where their keys come from.
struct ResponseLog {
  bool create = false;
  uint16_t port = 0;
  rpmem::proto::TransportKind kind = rpmem::proto::TransportKind::kTcp;
  size_t pool_size = 0;
  unsigned nlanes = 0;
  bool apm = false;
  bool sealed = false, tls = false;
  bool keys_from_control = false;  // service mode: sealed keys from the control TLS session
  bool cert_lanes = false;         // service mode: TLS lanes with its certificates
};
void log_response(const ResponseLog &r);

}  // namespace rpmemd

#endif  // RPMEMD_SESSION_LOG_H
