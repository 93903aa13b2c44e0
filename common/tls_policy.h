// SPDX-License-Identifier: BSD-3-Clause
// The TLS policy both sides apply to their OpenSSL context: TLS 1.3, and
// TLS 1.2 only with ECDHE key exchange and AEAD ciphers (AES-GCM,
// ChaCha20-Poly1305); no session resumption (no tickets, no session cache),
// with a session id context set, so that a client that offers a session gets
// a full handshake instead of an error.
//
// Header-only: included only by the two TLS users, which link OpenSSL.
#ifndef RPMEM_COMMON_TLS_POLICY_H
#define RPMEM_COMMON_TLS_POLICY_H

#include <openssl/ssl.h>

namespace rpmem {

// The TLS 1.2 cipher list (TLS 1.3 keeps OpenSSL's default suites, all AEAD).
inline constexpr const char *kTls12Ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL";

// Applies the policy to `ctx`. Returns nullptr, or the OpenSSL call that
// failed.
inline const char *apply_tls_policy(SSL_CTX *ctx) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
    return "SSL_CTX_set_min_proto_version";
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) return "SSL_CTX_set_cipher_list";
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (SSL_CTX_set_num_tickets(ctx, 0) != 1) return "SSL_CTX_set_num_tickets";
  static const unsigned char kSidContext[] = "rpmem";
  if (SSL_CTX_set_session_id_context(ctx, kSidContext, sizeof(kSidContext) - 1) != 1)
    return "SSL_CTX_set_session_id_context";
  return nullptr;
}

}  // namespace rpmem

#endif  // RPMEM_COMMON_TLS_POLICY_H
