// SPDX-License-Identifier: BSD-3-Clause
// ControlChannel: the client's end of the control channel to an rpmemd --
// through ssh (SshChannel) or to a service over TLS (TlsChannel). Whole
// frames, every wait bounded.
//
// Thread-safety: one call at a time (the owner serialises).
#ifndef RPMEM_LIBRPMEM_CONTROL_CHANNEL_H
#define RPMEM_LIBRPMEM_CONTROL_CHANNEL_H

#include "common/proto.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

namespace rpmem {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;
  // Sends one whole frame. ECONNRESET when the peer is gone.
  virtual std::error_code send(const proto::Bytes &frame,
                               std::chrono::milliseconds timeout) noexcept = 0;
  // Receives one frame of the expected type: ECONNRESET (EOF), ETIMEDOUT,
  // EPROTO (malformed or unexpected frame).
  virtual std::error_code recv(proto::MsgType expected, proto::Bytes &payload,
                               std::chrono::milliseconds timeout) noexcept = 0;
  // What the other side said besides the protocol (ssh's stderr), for an
  // error message; may be empty.
  virtual std::string diagnostics() { return {}; }
  // Keying material bound to the channel's TLS session
  // (SSL_export_keying_material); false where there is none (ssh).
  virtual bool export_keying_material(uint8_t *, size_t, const char *, const uint8_t *,
                                      size_t) noexcept {
    return false;
  }
  // Ends the channel (and reaps what it started), bounded by `timeout`.
  virtual void close(std::chrono::milliseconds timeout) noexcept = 0;
  // A descriptor that reports a hang-up (POLLRDHUP, POLLHUP) when the other
  // side ends the channel: the socket, or the pipe from ssh. -1: none. The
  // caller polls a dup() of it, never reads it.
  virtual int hangup_fd() const noexcept { return -1; }
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_CONTROL_CHANNEL_H
