// SPDX-License-Identifier: BSD-3-Clause
// Bounded waits over a ByteStream, for the client side of encrypted lanes
// (TLS and sealed): whole sends and receives, each wait limited by a
// timeout, and receives that spin a while before they sleep. socket_io.h
// has the same over a plain socket.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_STREAM_IO_H
#define RPMEM_COMMON_TRANSPORT_TCP_STREAM_IO_H

#include "common/transport/tcp/byte_stream.h"

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <system_error>

namespace rpmem::transport::tcp {

// Sends every byte of iov[0..n) (iov is consumed); timeout_ms bounds each
// wait for the socket to become writable.
std::error_code stream_send_all(ByteStream &s, iovec *iov, int n, int timeout_ms) noexcept;
// Receives exactly len bytes into the caller's own memory
// (recv_scratch_nowait); timeout_ms bounds each wait.
std::error_code stream_recv_all(ByteStream &s, void *buf, size_t len, int timeout_ms) noexcept;
// As recv_spinning(): the bytes received (1..len), or 0 when nothing came
// within `budget`, on EOF or on an error.
size_t stream_recv_spinning(ByteStream &s, void *buf, size_t len,
                            std::chrono::nanoseconds budget) noexcept;

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_STREAM_IO_H
