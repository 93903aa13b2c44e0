// SPDX-License-Identifier: BSD-3-Clause
// TlsControlStream: a TLS connection as a session's control channel, on the
// session's thread (an OpenSSL adapter). After the handshake the connection
// leaves Asio: OpenSSL reads and writes the socket itself (blocking), so
// that a wait for input can poll the socket and the session's wake-up
// descriptors (a failed lane, the idle bound) together -- bytes OpenSSL
// holds are asked with SSL_pending(); nothing else buffers them. The client
// sends nothing between its handshake and our hello, so no byte Asio read
// is left behind.
// Errors: ECONNRESET when the client is gone (EOF, a TLS close, a reset);
// EINTR with `woken` when a wake-up descriptor fires; EPROTO for a
// malformed frame header.
#ifndef RPMEMD_TLS_CONTROL_STREAM_H
#define RPMEMD_TLS_CONTROL_STREAM_H

#include "rpmemd/control_io.h"

#include <openssl/ssl.h>

#include <vector>

namespace rpmemd {

class TlsControlStream final : public ControlStream {
 public:
  // `ssl`: the connection, its handshake done; `fd`: its socket, made
  // blocking here. Neither is owned.
  TlsControlStream(SSL *ssl, int fd);
  std::error_code read_frame(proto::FrameHeader &hdr, proto::Bytes &payload, int &woken) override;
  std::error_code write_all(const proto::Bytes &bytes) override;
  void add_wake_fd(int fd) override { wake_.push_back(fd); }
  // close_notify, so that the client sees an orderly end.
  void shutdown() noexcept { SSL_shutdown(ssl_); }

 private:
  std::error_code read_exact(uint8_t *buf, size_t n, int &woken);
  // Until the socket has input: EINTR with `woken` when a wake-up
  // descriptor comes first.
  std::error_code gone(int rc);

  SSL *ssl_;
  int fd_;
  std::vector<int> wake_;
};

}  // namespace rpmemd

#endif  // RPMEMD_TLS_CONTROL_STREAM_H
