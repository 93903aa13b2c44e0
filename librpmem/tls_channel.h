// SPDX-License-Identifier: BSD-3-Clause
// TlsChannel: the control channel to an rpmemd service (rpmems:// targets):
// TCP + TLS with the client certificate of RPMEM_TLS_CERT/RPMEM_TLS_KEY,
// the service's certificate checked against RPMEM_TLS_CA and the host name.
#ifndef RPMEM_LIBRPMEM_TLS_CHANNEL_H
#define RPMEM_LIBRPMEM_TLS_CHANNEL_H

#include "common/error.h"
#include "librpmem/control_channel.h"
#include "librpmem/settings.h"
#include "librpmem/target_address.h"

#include <memory>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace rpmem {

// The context of TLS data lanes to an rpmemd service: the control channel's
// files (RPMEM_TLS_CERT, RPMEM_TLS_KEY, RPMEM_TLS_CA), TLS 1.3 only, the
// service's certificate checked against the CA (the host name per lane).
// EINVAL with the reason when a file is wrong.
Result<std::shared_ptr<ssl_ctx_st>> lane_tls_context(const Settings &settings);

class TlsChannel final : public ControlChannel {
 public:
  // Connects and completes the TLS handshake within the control timeout.
  // Errors: EINVAL (no RPMEM_TLS_CA, unreadable files), ECONNREFUSED,
  // ECONNRESET (handshake refused: message says why), ETIMEDOUT.
  // `timeout` (when set) replaces the control timeout.
  static Result<std::unique_ptr<TlsChannel>> connect(
      const TargetAddress &target, const Settings &settings,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  ~TlsChannel() override;
  TlsChannel(const TlsChannel &) = delete;
  TlsChannel &operator=(const TlsChannel &) = delete;

  std::error_code send(const proto::Bytes &frame,
                       std::chrono::milliseconds timeout) noexcept override;
  std::error_code recv(proto::MsgType expected, proto::Bytes &payload,
                       std::chrono::milliseconds timeout) noexcept override;
  void close(std::chrono::milliseconds timeout) noexcept override;
  int hangup_fd() const noexcept override;
  bool export_keying_material(uint8_t *out, size_t len, const char *label, const uint8_t *context,
                              size_t context_len) noexcept override;

 private:
  struct Impl;
  explicit TlsChannel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_TLS_CHANNEL_H
