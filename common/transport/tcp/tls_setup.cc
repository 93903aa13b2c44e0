// SPDX-License-Identifier: BSD-3-Clause
// TLS data lanes below the stream: the pre-shared key contexts, the socket
// BIO and its cork, the kernel TLS probe and SIGPIPE guard, OpenSSL's
// errors as errno values, and the handshake.
#include "common/transport/tcp/tls_setup.h"

#include "common/error.h"
#include "common/transport/tcp/socket_io.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

namespace rpmem::transport::tcp {
namespace {

// OpenSSL's receive buffer, which read-ahead fills: several full records
// per receive rather than one (a 1 MiB transfer is 64 records).
constexpr size_t kReadBuffer = 64 * 1024;

// The PSK's identity: the key itself is per session, so one name will do.
constexpr unsigned char kPskIdentity[] = "rpmem lane";
constexpr size_t kPskIdentityLen = sizeof(kPskIdentity) - 1;
// kLaneSuite's code point (RFC 8446, B.4).
constexpr unsigned char kLaneSuiteId[] = {0x13, 0x01};

// The key a PSK context holds, freed with the context.
int psk_index() {
  static const int index = SSL_CTX_get_ex_new_index(
      0, nullptr, nullptr, nullptr, [](void *, void *ptr, CRYPTO_EX_DATA *, int, long, void *) {
        delete static_cast<std::vector<uint8_t> *>(ptr);
      });
  return index;
}

// A resumable-looking session that carries the external PSK.
SSL_SESSION *psk_session(SSL *ssl) {
  const auto *key = static_cast<const std::vector<uint8_t> *>(
      SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), psk_index()));
  const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, kLaneSuiteId);
  if (!key || !cipher) return nullptr;
  SSL_SESSION *s = SSL_SESSION_new();
  if (!s) return nullptr;
  if (SSL_SESSION_set1_master_key(s, key->data(), key->size()) != 1 ||
      SSL_SESSION_set_cipher(s, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

int use_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
            SSL_SESSION **sess) {
  *sess = nullptr;
  // After a HelloRetryRequest the suite is fixed: offer the key only for its hash.
  if (md && md != EVP_sha256()) return 1;
  *sess = psk_session(ssl);
  *id = kPskIdentity;
  *idlen = kPskIdentityLen;
  return *sess ? 1 : 0;
}

int find_psk(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess) {
  *sess = nullptr;
  if (idlen != kPskIdentityLen || std::memcmp(id, kPskIdentity, idlen) != 0)
    return 1;  // unknown identity: no PSK, and without a certificate no handshake
  *sess = psk_session(ssl);
  return *sess ? 1 : 0;
}

// The BIO of a lane without kernel TLS: the socket, sent to with
// MSG_NOSIGNAL, and with MSG_MORE while `more` (the records of one large
// write go out in full segments, not a segment per record).
struct SocketBio {
  int fd;
  bool eof = false;
  bool more = false;
};

int bio_write(BIO *b, const char *data, int len) {
  auto *s = static_cast<SocketBio *>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  for (;;) {
    ssize_t n =
        ::send(s->fd, data, static_cast<size_t>(len), MSG_NOSIGNAL | (s->more ? MSG_MORE : 0));
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
    return -1;
  }
}

int bio_read(BIO *b, char *data, int len) {
  auto *s = static_cast<SocketBio *>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  for (;;) {
    ssize_t n = ::recv(s->fd, data, static_cast<size_t>(len), 0);
    if (n > 0) return static_cast<int>(n);
    if (n == 0) {
      s->eof = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
    return -1;
  }
}

long bio_ctrl(BIO *b, int cmd, long, void *ptr) {
  auto *s = static_cast<SocketBio *>(BIO_get_data(b));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_EOF:
      return s && s->eof ? 1 : 0;
    case BIO_C_GET_FD:
      if (!s) return -1;
      if (ptr) *static_cast<int *>(ptr) = s->fd;
      return s->fd;
    default:
      return 0;
  }
}

int bio_destroy(BIO *b) {
  delete static_cast<SocketBio *>(BIO_get_data(b));
  BIO_set_data(b, nullptr);
  return 1;
}

int socket_bio_type() {
  static const int type = BIO_get_new_index() | BIO_TYPE_SOURCE_SINK;
  return type;
}

BIO_METHOD *socket_bio_method() {
  static BIO_METHOD *const method = [] {
    BIO_METHOD *m = BIO_meth_new(socket_bio_type(), "rpmem lane socket");
    if (m) {
      BIO_meth_set_write(m, bio_write);
      BIO_meth_set_read(m, bio_read);
      BIO_meth_set_ctrl(m, bio_ctrl);
      BIO_meth_set_destroy(m, bio_destroy);
    }
    return m;
  }();
  return method;
}

const char *reason_now() {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : nullptr;
  ERR_clear_error();
  return r ? r : "TLS error";
}

}  // namespace

void NoSigpipe::block() noexcept {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
}

void NoSigpipe::unblock() noexcept {
  if (!was_pending_) {
    const int saved = errno;
    timespec zero{};
    while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
    }
    errno = saved;
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

std::error_code ssl_outcome(SSL *ssl, int rc, short &want, const char **why) noexcept {
  const int saved = errno;
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
      want = POLLIN;
      return {};
    case SSL_ERROR_WANT_WRITE:
      want = POLLOUT;
      return {};
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      return errc(ECONNRESET);
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      if (why) *why = saved ? strerror(saved) : "connection closed";
      // errno 0: EOF without close_notify.
      return saved == 0 ? errc(ECONNRESET) : io_error(saved);
    default: {
      const unsigned long e = ERR_peek_last_error();
      const bool eof = ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
      const char *r = reason_now();
      if (why) *why = r;
      return errc(eof ? ECONNRESET : EPROTO);
    }
  }
}

const KernelTls &kernel_tls() noexcept {
  static const KernelTls probe = [] {
    KernelTls k;
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      k.probe_errno = errno;
      return k;
    }
    if (::setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) == 0) {
      k.available = true;  // an older kernel that allows it unconnected
    } else {
      k.probe_errno = errno;
      k.available = errno == ENOTCONN;
    }
    ::close(fd);
    return k;
  }();
  return probe;
}

const char *record_layer(SSL *ssl) noexcept {
#ifndef OPENSSL_NO_KTLS
  const bool tx = BIO_get_ktls_send(SSL_get_wbio(ssl)) > 0;
  const bool rx = BIO_get_ktls_recv(SSL_get_rbio(ssl)) > 0;
  if (tx && rx) return "kernel TLS";
  if (tx) return "kernel TLS (send only)";
  if (rx) return "kernel TLS (receive only)";
#else
  (void)ssl;
#endif
  return "user-space TLS";
}

bool export_keying_material(SSL *ssl, uint8_t *out, size_t len, const char *label,
                            const uint8_t *context, size_t context_len) noexcept {
  return SSL_export_keying_material(ssl, out, len, label, std::strlen(label), context, context_len,
                                    1) == 1;
}

std::shared_ptr<SSL_CTX> make_psk_context(bool server, std::span<const uint8_t> psk,
                                          std::string &why) {
  SSL_CTX *raw = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (!raw) {
    why = std::string("SSL_CTX_new: ") + reason_now();
    return nullptr;
  }
  std::shared_ptr<SSL_CTX> ctx(raw, SSL_CTX_free);
  auto *key = new (std::nothrow) std::vector<uint8_t>(psk.begin(), psk.end());
  if (!key || psk_index() < 0 || SSL_CTX_set_ex_data(raw, psk_index(), key) != 1) {
    delete key;
    why = "cannot keep the lane key";
    return nullptr;
  }
  if (SSL_CTX_set_min_proto_version(raw, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(raw, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_ciphersuites(raw, kLaneSuite) != 1 || SSL_CTX_set_num_tickets(raw, 0) != 1) {
    why = std::string("lane TLS policy: ") + reason_now();
    return nullptr;
  }
  SSL_CTX_set_options(raw, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_session_cache_mode(raw, SSL_SESS_CACHE_OFF);
  if (server)
    SSL_CTX_set_psk_find_session_callback(raw, find_psk);
  else
    SSL_CTX_set_psk_use_session_callback(raw, use_psk);
  return ctx;
}

bool attach_socket(SSL *ssl, int fd) noexcept {
  SSL_set_read_ahead(ssl, 1);
  SSL_set_default_read_buffer_len(ssl, kReadBuffer);
  SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (kernel_tls().available) {
    if (SSL_set_fd(ssl, fd) != 1) return false;
    SSL_set_options(ssl, SSL_OP_ENABLE_KTLS);
    return true;
  }
  BIO_METHOD *m = socket_bio_method();
  BIO *b = m ? BIO_new(m) : nullptr;
  if (!b) return false;
  auto *data = new (std::nothrow) SocketBio{fd};
  if (!data) {
    BIO_free(b);
    return false;
  }
  BIO_set_data(b, data);
  BIO_set_init(b, 1);
  SSL_set_bio(ssl, b, b);  // one reference, for both directions
  return true;
}

bool cork(SSL *ssl, bool on) noexcept {
  BIO *b = SSL_get_wbio(ssl);
  if (!b || BIO_method_type(b) != socket_bio_type()) return false;
  auto *s = static_cast<SocketBio *>(BIO_get_data(b));
  if (!s) return false;
  s->more = on;
  if (!on) {
    const int saved = errno;
    const int one = 1;
    ::setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    errno = saved;
  }
  return true;
}

std::error_code handshake_step(SSL *ssl, short &want, const char *&why) noexcept {
  NoSigpipe guard;
  ERR_clear_error();
  errno = 0;
  const int rc = SSL_do_handshake(ssl);
  if (rc == 1) return {};
  want = 0;
  why = "TLS handshake failed";
  std::error_code ec = ssl_outcome(ssl, rc, want, &why);
  if (!ec && want) return errc(EAGAIN);
  return ec ? ec : errc(EPROTO);
}

std::error_code client_handshake(SSL *ssl, int fd, int timeout_ms, std::string &why) noexcept {
  const auto deadline = deadline_of(timeout_ms);
  for (;;) {
    short want = 0;
    const char *reason = nullptr;
    std::error_code ec = handshake_step(ssl, want, reason);
    if (!ec) return {};
    if (ec.value() != EAGAIN) {
      why = reason ? reason : ec.message();
      return ec;
    }
    if (auto wec = wait_for(fd, want, timeout_ms, deadline)) {
      why = "no TLS handshake in time";
      return wec;
    }
  }
}

}  // namespace rpmem::transport::tcp
