// SPDX-License-Identifier: BSD-3-Clause
// TLS data lanes: TlsStream, a ByteStream over an OpenSSL connection on a
// non-blocking socket, so that an encrypted lane is served by the same lane
// server as a cleartext one. What it stands on (contexts, the socket BIO,
// kernel TLS, the handshake) is tls_setup.h's; the client's bounded waits
// over it are stream_io.h's. Both are included here for its users.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TLS_STREAM_H
#define RPMEM_COMMON_TRANSPORT_TCP_TLS_STREAM_H

#include "common/transport/tcp/byte_stream.h"
#include "common/transport/tcp/stream_io.h"
#include "common/transport/tcp/tls_setup.h"

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <system_error>

namespace rpmem::transport::tcp {

// Bytes a lane sends under one key before it moves to the next (a TLS 1.3
// KeyUpdate): AES-GCM keys must not seal more than about 2^24.5 full
// records (RFC 8446, 5.5), 380 GiB; a lane at 1 GB/s gets there in six
// minutes.
inline constexpr uint64_t kKeyUpdateBytes = uint64_t{64} << 30;

// A connected, non-blocking socket carrying TLS; owns both.
class TlsStream final : public ByteStream {
 public:
  // `ssl` will complete its handshake on `fd`. `key_update_bytes`: sent
  // under one key before the next KeyUpdate.
  TlsStream(SSL *ssl, int fd, uint64_t key_update_bytes = kKeyUpdateBytes) noexcept;
  ~TlsStream() override;
  TlsStream(const TlsStream &) = delete;
  TlsStream &operator=(const TlsStream &) = delete;

  int fd() const noexcept override { return fd_; }
  // Decrypted bytes, as many records as have arrived. EOF (with or without
  // close_notify) is ECONNRESET; a record that does not authenticate is
  // EPROTO.
  std::error_code recv_nowait(void *buf, size_t len, size_t &got) noexcept override;
  // Small buffers are gathered into one record. A write that the socket
  // could not take whole is retried with the same bytes (the iovecs only
  // advance past what OpenSSL reported written).
  std::error_code send_nowait(iovec *&iov, int &n) noexcept override;
  // Decrypted bytes, or records OpenSSL has read ahead from the socket that
  // a receive which stopped at a full buffer left behind. (One that
  // stopped for want of input leaves at most a partial record: that waits
  // for the socket.)
  bool has_buffered_input() const noexcept override {
    return SSL_pending(ssl_) > 0 || (stopped_full_ && SSL_has_pending(ssl_) == 1);
  }

  SSL *ssl() const noexcept { return ssl_; }

 private:
  SSL *ssl_;
  const int fd_;
  std::unique_ptr<uint8_t[]> stage_;  // gathers small iovecs
  bool stopped_full_ = false;         // the last recv_nowait filled its buffer
  const uint64_t key_update_bytes_;
  uint64_t sent_under_key_ = 0;
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TLS_STREAM_H
