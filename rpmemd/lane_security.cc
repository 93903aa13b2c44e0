// SPDX-License-Identifier: BSD-3-Clause
// choose_lane_security(): cleartext, TLS or sealed lanes for a session.
#include "rpmemd/lane_security.h"

namespace rpmemd {

namespace proto = rpmem::proto;

LaneSecurity choose_lane_security(DataTls policy, bool seal, uint16_t minor, uint32_t lane_flags) {
  const bool capable = minor >= proto::kMinorLaneTls;
  const bool asks = (lane_flags & proto::kLaneTls) != 0;
  LaneSecurity s;
  switch (policy) {
    case DataTls::kNo:
      if (asks) {
        s.status = proto::Status::kProvNoSup;
        s.why = "the client asks for TLS data lanes: this daemon has none (data-tls = no)";
      }
      break;
    case DataTls::kAllow:
      s.tls = asks;
      break;
    case DataTls::kYes:
      s.tls = capable;
      break;
    case DataTls::kRequire:
      if (!capable) {
        s.status = proto::Status::kProvNoSup;
        s.why = "data-tls = require: the client (protocol " + std::to_string(proto::kMajor) + "." +
                std::to_string(minor) + ") cannot run its data lanes inside TLS";
      }
      s.tls = capable;
      break;
  }
  // Sealed rather than TLS: when the client can seal and this daemon lets it.
  s.sealed = s.tls && seal && minor >= proto::kMinorSealed && (lane_flags & proto::kLaneSealed);
  return s;
}

}  // namespace rpmemd
