// SPDX-License-Identifier: BSD-3-Clause
// What a tcp lane server needs of a connection: non-blocking receives and
// gathered sends, and a descriptor whose readiness tells when to try again.
// A plain socket is one; an encrypted stream can be another, with
// has_buffered_input() for bytes it has already decrypted.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_BYTE_STREAM_H
#define RPMEM_COMMON_TRANSPORT_TCP_BYTE_STREAM_H

#include "common/transport/tcp/socket_io.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <system_error>

namespace rpmem::transport::tcp {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // The descriptor to wait on (readable: try recv; writable: try send).
  virtual int fd() const noexcept = 0;
  // What has arrived, without waiting (got == 0: nothing yet). EOF is
  // ECONNRESET.
  virtual std::error_code recv_nowait(void *buf, size_t len, size_t &got) noexcept = 0;
  // The same into memory that is the caller's own scratch, never the pool:
  // an encrypted stream may decrypt straight into it, before it knows that
  // the bytes authenticate (it clears them when they do not, and fails).
  virtual std::error_code recv_scratch_nowait(void *buf, size_t len, size_t &got) noexcept {
    return recv_nowait(buf, len, got);
  }
  // What the connection takes now; iov and n advance (n == 0: all sent).
  virtual std::error_code send_nowait(iovec *&iov, int &n) noexcept = 0;
  // Bytes ready for recv_nowait that readiness of fd() would not show.
  virtual bool has_buffered_input() const noexcept { return false; }
};

// A connected, non-blocking socket; closes it.
class SocketStream final : public ByteStream {
 public:
  explicit SocketStream(int fd) noexcept : fd_(fd) {}
  ~SocketStream() override { ::close(fd_); }
  SocketStream(const SocketStream &) = delete;
  SocketStream &operator=(const SocketStream &) = delete;

  int fd() const noexcept override { return fd_; }
  std::error_code recv_nowait(void *buf, size_t len, size_t &got) noexcept override {
    return tcp::recv_nowait(fd_, buf, len, got);
  }
  std::error_code send_nowait(iovec *&iov, int &n) noexcept override {
    return tcp::send_nowait(fd_, iov, n);
  }

 private:
  const int fd_;
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_BYTE_STREAM_H
