// SPDX-License-Identifier: BSD-3-Clause
// A session's log lines in PMDK's words (session_log.h).
#include "rpmemd/session_log.h"

#include "common/log.h"

#include <array>
#include <cstdio>
#include <cstring>

namespace rpmemd {
namespace {

namespace proto = rpmem::proto;

const char *kGpspmName = "General Purpose Server Persistency Method";
const char *kApmName = "Appliance Persistency Method";

// A UUID as PMDK printed it: the first three fields read in host byte order.
std::string uuid_str(const std::array<uint8_t, 16> &u) {
  uint32_t time_low;
  uint16_t time_mid, time_hi;
  std::memcpy(&time_low, &u[0], 4);
  std::memcpy(&time_mid, &u[4], 2);
  std::memcpy(&time_hi, &u[6], 2);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", time_low,
                time_mid, time_hi, u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return buf;
}

}  // namespace

std::string provider_names(uint32_t t) {
  std::string out;
  for (auto k : {proto::TransportKind::kVerbs, proto::TransportKind::kTcp})
    if (t & proto::transport_bit(k))
      out += (out.empty() ? "" : ", ") + std::string(proto::transport_name(k));
  return out.empty() ? "(none)" : out;
}

void log_pool_attr(const rpmem::PoolAttr *attr) {
  if (!attr) {
    RPMEM_LOG_INFO("\tNULL");
    return;
  }
  const auto &sig = attr->signature;
  RPMEM_LOG_INFO("\tsignature: '%.*s'", static_cast<int>(strnlen(sig.data(), sig.size())),
                 sig.data());
  RPMEM_LOG_INFO("\tmajor: %u", attr->major);
  RPMEM_LOG_INFO("\tcompat_features: 0x%x", attr->compat_features);
  RPMEM_LOG_INFO("\tincompat_features: 0x%x", attr->incompat_features);
  RPMEM_LOG_INFO("\tro_compat_features: 0x%x", attr->ro_compat_features);
  RPMEM_LOG_INFO("\tpoolset_uuid: %s", uuid_str(attr->poolset_uuid).c_str());
  RPMEM_LOG_INFO("\tuuid: %s", uuid_str(attr->uuid).c_str());
  RPMEM_LOG_INFO("\tnext_uuid: %s", uuid_str(attr->next_uuid).c_str());
  RPMEM_LOG_INFO("\tprev_uuid: %s", uuid_str(attr->prev_uuid).c_str());
}

std::string durability_text(proto::Durability pool, bool visible,
                            const rpmem::transport::MediumTraits &medium,
                            std::chrono::milliseconds write_back) {
  if (pool == proto::Durability::kPersistent)
    return visible ? "persistent (visible calls granted)" : "persistent";
  if (!medium.visible_cheaper)
    return std::string("visible (") + medium.noun + ": acknowledged persistent, at no extra cost)";
  return std::string("visible (acknowledged in ") + medium.noun + ", persistent at the latest " +
         std::to_string(write_back.count()) + " ms later)";
}

void log_policy(proto::TransportKind kind, bool apm, const rpmem::transport::MediumTraits &medium,
                const std::string &data_path, const std::string &durability) {
  RPMEM_LOG_NOTICE("persistency policy:");
  if (apm) {
    RPMEM_LOG_NOTICE("\tpersist method: %s", kApmName);
    RPMEM_LOG_NOTICE("\tpersist flush: none");
  } else {
    RPMEM_LOG_NOTICE("\tpersist method: %s", kGpspmName);
    RPMEM_LOG_NOTICE("\tpersist flush: %s", medium.flush);
  }
  RPMEM_LOG_NOTICE("\tmedium: %s", medium.description);
  RPMEM_LOG_NOTICE("\tdurability: %s", durability.c_str());
  // APM over tcp: no RDMA READ to wait for; the daemon flushes as it copies.
  if (apm && kind == proto::TransportKind::kTcp)
    RPMEM_LOG_NOTICE(
        "\tAPM over tcp: each write is flushed into the pool as it lands "
        "(pmem_persist), before the reply");
  // The medium decides where a NIC may write (verbs_target.h).
  if (kind == proto::TransportKind::kVerbs)
    RPMEM_LOG_NOTICE("\tRDMA writes: %s", data_path.c_str());
}

void log_response(const ResponseLog &r) {
  RPMEM_LOG_NOTICE("%s request response: (status = 0)", r.create ? "create" : "open");
  RPMEM_LOG_NOTICE("\tport: %u", r.port);
  RPMEM_LOG_NOTICE("\tprovider: %s", proto::transport_name(r.kind));
  RPMEM_LOG_NOTICE("\tpool size: %zu", r.pool_size);
  RPMEM_LOG_NOTICE("\tnlanes: %u", r.nlanes);
  RPMEM_LOG_NOTICE("\tpersist method: %s", r.apm ? kApmName : kGpspmName);
  if (r.sealed)
    RPMEM_LOG_NOTICE("\tdata lanes: sealed, AES-128-GCM (%s)",
                     r.keys_from_control ? "keys from the control channel's TLS session"
                                         : "a key of the session, over ssh");
  else if (r.tls)
    RPMEM_LOG_NOTICE("\tdata lanes: TLS (%s)", r.cert_lanes ? "the control channel's certificates"
                                                            : "a pre-shared key of the session");
}

}  // namespace rpmemd
