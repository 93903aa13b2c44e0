// SPDX-License-Identifier: BSD-3-Clause
// TlsStream: a lane's records through OpenSSL, sent and received without
// waiting.
#include "common/transport/tcp/tls_stream.h"

#include "common/error.h"
#include "common/transport/tcp/socket_io.h"

#include <openssl/err.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rpmem::transport::tcp {
namespace {

// Bytes of small iovecs gathered into one record: a TLS record's payload.
constexpr size_t kStage = 16 * 1024;
// Bytes one SSL_write_ex takes at most, so that a KeyUpdate falls between
// the records of a large request.
constexpr size_t kMaxWrite = 1 << 20;

}  // namespace

TlsStream::TlsStream(SSL *ssl, int fd, uint64_t key_update_bytes) noexcept
    : ssl_(ssl), fd_(fd), key_update_bytes_(key_update_bytes) {}

TlsStream::~TlsStream() {
  SSL_free(ssl_);
  ::close(fd_);
}

std::error_code TlsStream::recv_nowait(void *buf, size_t len, size_t &got) noexcept {
  got = 0;
  NoSigpipe guard;  // a read may send an alert
  auto *p = static_cast<uint8_t *>(buf);
  while (got < len) {
    size_t n = 0;
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_read_ex(ssl_, p + got, len - got, &n);
    if (rc == 1) {
      got += n;
      // Nothing more inside OpenSSL: another read would only find the
      // socket empty (one receive more per request); what comes later
      // makes the socket readable.
      if (got < len && SSL_has_pending(ssl_) == 0) {
        stopped_full_ = false;
        return {};
      }
      continue;
    }
    short want = 0;
    // A read that wants to write (a key update) is tried again with the
    // next readiness; the lanes send no key updates of their own.
    std::error_code ec = ssl_outcome(ssl_, rc, want);
    stopped_full_ = false;
    if (ec && got > 0) return {};  // the bytes first; the error comes again
    return ec;
  }
  stopped_full_ = true;
  return {};
}

std::error_code TlsStream::send_nowait(iovec *&iov, int &n) noexcept {
  NoSigpipe guard;
  while (n > 0) {
    // What to write now. The choice depends only on the iovecs, so a write
    // retried after SSL_ERROR_WANT_WRITE offers the same bytes again.
    const void *p = iov[0].iov_base;
    size_t len = std::min(iov[0].iov_len, kMaxWrite);
    if (n > 1 && len < kStage) {
      if (!stage_) {
        stage_.reset(new (std::nothrow) uint8_t[kStage]);
        if (!stage_) return errc(ENOMEM);
      }
      len = 0;
      for (int i = 0; i < n && len < kStage; ++i) {
        const size_t take = std::min(iov[i].iov_len, kStage - len);
        std::memcpy(stage_.get() + len, iov[i].iov_base, take);
        len += take;
      }
      p = stage_.get();
    }
    if (len == 0) {  // empty iovecs only
      advance(iov, n, 0);
      continue;
    }
    size_t written = 0;
    ERR_clear_error();
    errno = 0;
    // A write of several records is corked until its end, then pushed.
    const bool corked = len > kStage && cork(ssl_, true);
    const int rc = SSL_write_ex(ssl_, p, len, &written);
    if (corked) cork(ssl_, false);  // errno stays what SSL_write_ex left, for ssl_outcome
    if (rc != 1) {
      short want = 0;
      return ssl_outcome(ssl_, rc, want);  // {}: the socket is full, n > 0
    }
    advance(iov, n, written);
    sent_under_key_ += written;
    if (sent_under_key_ >= key_update_bytes_) {
      // Our sending key only: the peer need not answer (it moves on its
      // own count). The KeyUpdate goes out before the next record.
      if (SSL_key_update(ssl_, SSL_KEY_UPDATE_NOT_REQUESTED) == 1) sent_under_key_ = 0;
      ERR_clear_error();
    }
  }
  return {};
}

}  // namespace rpmem::transport::tcp
