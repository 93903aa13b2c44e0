// SPDX-License-Identifier: BSD-3-Clause
// Bounded socket I/O on native descriptors: whole sends (gathered) and
// whole receives, each wait limited by a timeout.
//
// Errors: ECONNRESET for a closed or reset connection (EOF included),
// ETIMEDOUT when a wait ran out, or the errno of the failing call.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_SOCKET_IO_H
#define RPMEM_COMMON_TRANSPORT_TCP_SOCKET_IO_H

#include "common/error.h"

#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <system_error>

namespace rpmem::transport::tcp {

// Whether errno `err` of a send or a receive says that the peer is gone: it
// closed or reset the connection (EPIPE, ECONNRESET), or the connection has
// ended (ENOTCONN, ESHUTDOWN). The one set of every stream and channel here
// (socket I/O, TLS and sealed lanes, the daemon's ssh control channel),
// which report it as ECONNRESET, as they report EOF: io_error(). Sealed
// lanes and the control channel mapped EPIPE alone: the other values come
// of a connected socket only once its connection has ended, and every
// caller takes ECONNRESET to mean just that, so the narrower sets served no
// purpose. ETIMEDOUT (TCP_USER_TIMEOUT, keepalive) stays out: callers tell a
// peer that vanished from one that closed.
constexpr bool peer_gone(int err) noexcept {
  return err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ESHUTDOWN;
}
// errno `err` of a failed send or receive as its error: ECONNRESET when the
// peer is gone, else err.
inline std::error_code io_error(int err) noexcept {
  return errc(peer_gone(err) ? ECONNRESET : err);
}

inline constexpr int kWaitForever = -1;

// Sends every byte of iov[0..n). iov is consumed (modified). timeout_ms
// bounds each wait for the socket to become writable.
std::error_code send_all(int fd, iovec *iov, int n, int timeout_ms) noexcept;
std::error_code send_all(int fd, const void *buf, size_t len, int timeout_ms) noexcept;

// Sends what the socket takes now from iov[0..n), without waiting; iov and
// n are advanced past what was sent (n == 0: all of it).
std::error_code send_nowait(int fd, iovec *&iov, int &n) noexcept;

// Receives exactly len bytes.
std::error_code recv_all(int fd, void *buf, size_t len, int timeout_ms) noexcept;

// Receives between 1 and len bytes into buf; `got` tells how many.
std::error_code recv_some(int fd, void *buf, size_t len, size_t &got, int timeout_ms) noexcept;

// Receives what is there without waiting: `got` is 0 when nothing is.
std::error_code recv_nowait(int fd, void *buf, size_t len, size_t &got) noexcept;

// Polls fd with non-blocking receives, yielding the CPU in between, for at
// most `budget`: a reply or request that comes within it is taken without
// the thread going to sleep and being woken (which costs both sides several
// microseconds on a loaded machine). Returns the bytes received (1..len), or
// 0 when nothing came in time, on EOF or on an error -- the caller's usual
// blocking receive then waits or reports it.
size_t recv_spinning(int fd, void *buf, size_t len, std::chrono::nanoseconds budget) noexcept;

// Sleeps until fd is readable or `nap` has passed, whichever comes first,
// with a timer as precise as the system has (not the thread's timer slack).
// True when fd is readable as the nap ends.
bool nap_until_readable(int fd, std::chrono::nanoseconds nap) noexcept;

// Upper bound on RPMEM_WORK_QUEUE_SIZE for tcp lanes (two iovecs a flush
// must fit in one sendmsg, IOV_MAX 1024).
inline constexpr unsigned kMaxWorkQueue = 256;

// The pieces every bounded wait here is made of, for the streams built on
// these sockets too. A wait's deadline: now + timeout_ms (now when < 0).
std::chrono::steady_clock::time_point deadline_of(int timeout_ms) noexcept;
// Polls fd for `events` until `deadline`; timeout_ms < 0 waits forever.
// ETIMEDOUT when the deadline passed.
std::error_code wait_for(int fd, short events, int timeout_ms,
                         std::chrono::steady_clock::time_point deadline) noexcept;
// Moves iov/n past `sent` bytes.
void advance(iovec *&iov, int &n, size_t sent) noexcept;

// Waits until fd is readable (or hung up); ETIMEDOUT when it is not.
std::error_code wait_readable(int fd, int timeout_ms) noexcept;

void set_nodelay(int fd) noexcept;

// Bytes that wait unread on `fd` (FIONREAD; 0 on error).
size_t bytes_buffered(int fd) noexcept;
// Whether a whole first TLS record waits unread on `fd` (its 5-byte header
// and the length it names): what a client sends in one piece when it
// starts its handshake, and a stranger who sends a byte and stops never.
bool tls_record_buffered(int fd) noexcept;
// Whether the peer has closed its side (or reset the connection): what it
// sent is all it will ever send.
bool peer_hung_up(int fd) noexcept;

// A peer that vanishes (no RST, no FIN: a host that lost power or its
// network) fails the connection within about `timeout`: TCP keepalive
// probes an idle connection, TCP_USER_TIMEOUT bounds unacknowledged sends.
// 0 leaves the system's defaults (hours).
void set_peer_timeout(int fd, std::chrono::milliseconds timeout) noexcept;
std::error_code set_nonblocking(int fd, bool on) noexcept;

// Keepalive probes on an idle connection every second, from a second after
// the last packet (on), or none (off): while a client waits long for a
// reply, whether the target's host still answers them tells a slow target
// from a lost one. The kernel itself never gives up on the connection for
// them (a probe count it does not reach before the caller's bound).
void set_probes(int fd, bool on) noexcept;
// Whether the connection has stopped getting answers (TCP_INFO): its last
// two retransmissions, or two keepalive or window probes in a row, had
// none. A lossy link that still answers does not count: one lost segment is
// retransmitted once. False when the kernel does not say.
bool link_unanswered(int fd) noexcept;
// The connection's smoothed round-trip time (TCP_INFO); 0 when the kernel
// does not say.
std::chrono::microseconds smoothed_rtt(int fd) noexcept;

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_SOCKET_IO_H
