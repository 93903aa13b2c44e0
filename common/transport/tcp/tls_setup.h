// SPDX-License-Identifier: BSD-3-Clause
// What a TLS data lane needs below its stream (tls_stream.h): the lanes'
// suites and the pre-shared key contexts of ssh mode, the socket under a
// connection (a BIO of our own, or kernel TLS with SIGPIPE kept away), the
// kernel TLS probe, the handshake, and OpenSSL's errors as errno values.
//
// Kernel TLS: where the kernel has the "tls" upper-layer protocol, OpenSSL
// (SSL_OP_ENABLE_KTLS) hands the record layer to it after the handshake;
// elsewhere the records are encrypted in user space. record_layer() tells
// which one a connection got.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TLS_SETUP_H
#define RPMEM_COMMON_TRANSPORT_TCP_TLS_SETUP_H

#include <openssl/ssl.h>
#include <signal.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
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

// The lanes' first TLS 1.3 suite (AES-NI makes it the fastest), and the
// only one of lanes keyed by a pre-shared key.
inline constexpr char kLaneSuite[] = "TLS_AES_128_GCM_SHA256";
// The lanes' TLS 1.3 suites, kLaneSuite first (every suite is AEAD).
inline constexpr const char *kLaneCipherSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
static_assert(std::string_view(kLaneCipherSuites).starts_with(kLaneSuite));

// A context for lanes keyed by an external pre-shared key (ssh mode): TLS
// 1.3 only, kLaneSuite, the key exchanged with ECDHE on top of the PSK
// (forward secrecy). No certificates. `server`: the target's side.
// nullptr with `why` when OpenSSL refuses.
std::shared_ptr<SSL_CTX> make_psk_context(bool server, std::span<const uint8_t> psk,
                                          std::string &why);

// Puts `ssl` on the connected socket `fd`. Without kernel TLS through a
// BIO of our own that sends with MSG_NOSIGNAL (a peer that is gone is
// EPIPE, never SIGPIPE, which a library must not raise in its
// application); with it, on OpenSSL's socket BIO (which kernel TLS needs)
// with SSL_OP_ENABLE_KTLS, every call then made with SIGPIPE blocked and
// a SIGPIPE it raised taken back (NoSigpipe). Reads ahead: one receive takes
// as many records as have come and fit OpenSSL's buffer. False when
// OpenSSL fails.
bool attach_socket(SSL *ssl, int fd) noexcept;

// Corks (on) the sends of `ssl`'s BIO of our own, so that the records of
// one large write go out in full segments (MSG_MORE), or uncorks them (off)
// and pushes what is queued (TCP_NODELAY). Leaves errno as it was. False,
// and nothing done, when `ssl` writes through another BIO (kernel TLS).
bool cork(SSL *ssl, bool on) noexcept;

// Around every OpenSSL call on a lane: with kernel TLS, OpenSSL writes to
// the socket with write(2) and sendmsg(2) without MSG_NOSIGNAL, so SIGPIPE
// is blocked around each call and one that the call raised is taken back:
// the application never sees it. Nothing without kernel TLS.
class NoSigpipe {
 public:
  NoSigpipe() noexcept : on_(kernel_tls().available) {
    if (on_) block();
  }
  ~NoSigpipe() {
    if (on_) unblock();
  }
  NoSigpipe(const NoSigpipe &) = delete;
  NoSigpipe &operator=(const NoSigpipe &) = delete;

 private:
  void block() noexcept;
  void unblock() noexcept;

  const bool on_;
  bool was_pending_ = false;
  sigset_t pipe_{}, old_{};
};

// The outcome of an SSL_* call on `ssl` that returned `rc` (not success),
// with errno as the call left it: {} with `want` = POLLIN or POLLOUT while
// it waits; ECONNRESET when the peer is gone (EOF too, with or without
// close_notify); EPROTO for what TLS refused; another errno of the socket.
// `why` (when given): OpenSSL's reason or the errno's text, a static string.
std::error_code ssl_outcome(SSL *ssl, int rc, short &want, const char **why = nullptr) noexcept;

// One step of a non-blocking handshake: {} when it is complete, EAGAIN
// with `want` = POLLIN or POLLOUT while it waits, ECONNRESET for a closed
// connection, EPROTO for anything TLS refused (`why`: OpenSSL's reason, a
// static string).
std::error_code handshake_step(SSL *ssl, short &want, const char *&why) noexcept;

// Completes a client handshake within timeout_ms; `why` says what failed.
std::error_code client_handshake(SSL *ssl, int fd, int timeout_ms, std::string &why) noexcept;

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TLS_SETUP_H
