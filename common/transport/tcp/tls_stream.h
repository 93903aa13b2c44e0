// SPDX-License-Identifier: BSD-3-Clause
// TLS data lanes: a ByteStream over an OpenSSL connection on a non-blocking
// socket, so that an encrypted lane is served by the same lane server as a
// cleartext one, and what both sides need around it: the contexts (TLS 1.3
// with a pre-shared key in ssh mode), the non-blocking handshake step, the
// bounded waits of the client, and the kernel TLS probe.
//
// Kernel TLS: where the kernel has the "tls" upper-layer protocol, OpenSSL
// (SSL_OP_ENABLE_KTLS) hands the record layer to it after the handshake;
// elsewhere the records are encrypted in user space. record_layer() tells
// which one a connection got.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TLS_STREAM_H
#define RPMEM_COMMON_TRANSPORT_TCP_TLS_STREAM_H

#include "common/transport/tcp/byte_stream.h"

#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>

namespace rpmem::transport::tcp {

// Whether this kernel offers kernel TLS: setsockopt(TCP_ULP, "tls") on a
// fresh TCP socket fails with ENOENT when the kernel has no "tls" module,
// and with ENOTCONN (the socket is not connected yet) when it has. Probed
// once per process.
struct KernelTls {
  bool available = false;
  int probe_errno = 0;  // what the probe's setsockopt failed with
};
const KernelTls &kernel_tls() noexcept;

// "kernel TLS", "kernel TLS (send only)", "kernel TLS (receive only)" or
// "user-space TLS": what carries the records of `ssl` after its handshake.
const char *record_layer(SSL *ssl) noexcept;

// `len` bytes of keying material bound to the TLS session of `ssl`
// (SSL_export_keying_material, RFC 5705/8446), for `label` and `context`;
// both ends of the session get the same bytes. False when OpenSSL fails.
bool export_keying_material(SSL *ssl, uint8_t *out, size_t len, const char *label,
                            const uint8_t *context, size_t context_len) noexcept;

// The lanes' TLS 1.3 suites, AES-128-GCM first (AES-NI makes it the
// fastest; every suite is AEAD).
inline constexpr const char *kLaneCipherSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// A context for lanes keyed by an external pre-shared key (ssh mode): TLS
// 1.3 only, TLS_AES_128_GCM_SHA256, the key exchanged with ECDHE on top of
// the PSK (forward secrecy). No certificates. `server`: the target's side.
// nullptr with `why` when OpenSSL refuses.
std::shared_ptr<SSL_CTX> make_psk_context(bool server, std::span<const uint8_t> psk,
                                          std::string &why);

// Puts `ssl` on the connected socket `fd`. Without kernel TLS through a
// BIO of our own that sends with MSG_NOSIGNAL (a peer that is gone is
// EPIPE, never SIGPIPE, which a library must not raise in its
// application); with it, on OpenSSL's socket BIO (which kernel TLS needs)
// with SSL_OP_ENABLE_KTLS, every call then made with SIGPIPE blocked and
// a SIGPIPE it raised taken back. Reads ahead: one receive takes as many
// records as have come and fit OpenSSL's buffer. False when OpenSSL fails.
bool attach_socket(SSL *ssl, int fd) noexcept;

// One step of a non-blocking handshake: {} when it is complete, EAGAIN
// with `want` = POLLIN or POLLOUT while it waits, ECONNRESET for a closed
// connection, EPROTO for anything TLS refused (`why`: OpenSSL's reason, a
// static string).
std::error_code handshake_step(SSL *ssl, short &want, const char *&why) noexcept;

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

// Client side: bounded waits over a stream (timeout_ms bounds each wait).
// What they receive into is the caller's own memory (recv_scratch_nowait).
std::error_code stream_send_all(ByteStream &s, iovec *iov, int n, int timeout_ms) noexcept;
std::error_code stream_recv_all(ByteStream &s, void *buf, size_t len, int timeout_ms) noexcept;
// As recv_spinning(): 0 when nothing came within `budget`.
size_t stream_recv_spinning(ByteStream &s, void *buf, size_t len,
                            std::chrono::nanoseconds budget) noexcept;
// Completes a client handshake within timeout_ms; `why` says what failed.
std::error_code client_handshake(SSL *ssl, int fd, int timeout_ms, std::string &why) noexcept;

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TLS_STREAM_H
