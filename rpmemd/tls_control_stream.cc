// SPDX-License-Identifier: BSD-3-Clause
// TlsControlStream: frames over a TLS connection that OpenSSL reads and
// writes itself, with the session's wake-up descriptors polled beside it.
#include "rpmemd/tls_control_stream.h"

#include "common/error.h"
#include "common/log.h"

#include <fcntl.h>
#include <openssl/err.h>

#include <algorithm>
#include <climits>

namespace rpmemd {

using rpmem::errc;

TlsControlStream::TlsControlStream(SSL *ssl, int fd) : ssl_(ssl), fd_(fd) {
  SSL_set_fd(ssl_, fd_);  // the socket BIO does not close fd_
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

std::error_code TlsControlStream::read_frame(proto::FrameHeader &hdr, proto::Bytes &payload,
                                             int &woken) {
  return read_frame_with([&](uint8_t *buf, size_t n) { return read_exact(buf, n, woken); }, hdr,
                         payload);
}

std::error_code TlsControlStream::write_all(const proto::Bytes &bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const int n = SSL_write(ssl_, bytes.data() + off, static_cast<int>(bytes.size() - off));
    if (n <= 0) return gone(n);
    off += static_cast<size_t>(n);
  }
  return {};
}

std::error_code TlsControlStream::read_exact(uint8_t *buf, size_t n, int &woken) {
  while (n > 0) {
    if (SSL_pending(ssl_) == 0)
      if (auto ec = rpmemd::wait_readable(fd_, wake_, woken)) return ec;
    const int got = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(n, INT_MAX)));
    if (got <= 0) {
      const int err = SSL_get_error(ssl_, got);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) continue;
      return gone(got);
    }
    buf += got;
    n -= static_cast<size_t>(got);
  }
  return {};
}

std::error_code TlsControlStream::gone(int rc) {
  // EOF, a TLS close, a reset or a shut-down socket: the client is gone.
  RPMEM_LOG_DEBUG("control connection: TLS error %d", SSL_get_error(ssl_, rc));
  ERR_clear_error();
  return errc(ECONNRESET);
}

}  // namespace rpmemd
