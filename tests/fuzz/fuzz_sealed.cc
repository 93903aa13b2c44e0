// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the sealed frame parser (SealedStream, the target side).
// The first byte chooses the input's use:
//   even: the rest is what a peer sends, fed as is;
//   odd:  byte 1 is a number of messages, bytes 2-5 a position and a mask;
//         the rest is cut into that many messages, which a real client
//         seals; the byte at the position (modulo the wire's length) is
//         xored with the mask, and the wire is fed.
// What the target reads must be a prefix of what was sealed, all of it
// when nothing was altered: no byte that did not authenticate is ever
// handed out.
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/tls_stream.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace rpmem::transport::tcp;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// A socketpair whose buffers hold a whole input's wire.
void wide_pair(int (&sv)[2]) {
  check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
  int big = 4 << 20;
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  ::setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
}

SealKeys keys() {
  SealKeys k;
  k.on = true;
  k.master.fill(0x5e);
  k.rotate_frames = 3;  // rotations are reached within one input
  return k;
}

// Feeds `wire` to a target stream and returns what it reads: into the
// caller's scratch (frames up to 3000 bytes are opened straight into it) or
// as into the pool (each frame opened in place first).
std::vector<uint8_t> target_reads(const std::vector<uint8_t> &wire, bool scratch) {
  int sv[2];
  wide_pair(sv);
  if (!wire.empty()) check(::send(sv[0], wire.data(), wire.size(), 0) == ssize_t(wire.size()));
  ::close(sv[0]);
  auto t = SealedStream::target(sv[1], keys(), 4);
  std::vector<uint8_t> got;
  uint8_t buf[3000];
  for (;;) {
    size_t n = 0;
    if (scratch ? t->recv_scratch_nowait(buf, sizeof(buf), n) : t->recv_nowait(buf, sizeof(buf), n))
      break;
    got.insert(got.end(), buf, buf + n);
    if (n == 0 && !t->has_buffered_input()) break;
  }
  return got;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if ((data[0] & 1) == 0) {
    const std::vector<uint8_t> wire(data + 1, data + size);
    const auto got = target_reads(wire, data[0] & 2);
    check(got.size() <= wire.size());
    return 0;
  }
  if (size < 6) return 0;
  const unsigned nmsg = 1 + data[1] % 8;
  const uint32_t pos = uint32_t{data[2]} | uint32_t{data[3]} << 8 | uint32_t{data[4]} << 16;
  const uint8_t mask = data[5];
  const uint8_t *body = data + 6;
  const size_t len = size - 6;
  // The client's wire.
  int sv[2];
  wide_pair(sv);
  auto c = SealedStream::client(sv[0], keys(), 2);
  std::vector<uint8_t> plain;
  for (unsigned i = 0; i < nmsg; ++i) {
    const size_t from = len * i / nmsg, to = len * (i + 1) / nmsg;
    if (to == from) continue;
    iovec iov{const_cast<uint8_t *>(body + from), to - from};
    check(!stream_send_all(*c, &iov, 1, 1000));
    plain.insert(plain.end(), body + from, body + to);
  }
  std::vector<uint8_t> wire(len + 4 + nmsg * (kSealedHeader + kSealedTag) + 64);
  const ssize_t n = ::recv(sv[1], wire.data(), wire.size(), 0);
  ::close(sv[1]);
  wire.resize(n > 0 ? size_t(n) : 0);
  const bool altered = mask != 0 && !wire.empty();
  if (altered) wire[pos % wire.size()] ^= mask;
  const auto got = target_reads(wire, data[0] & 2);
  check(got.size() <= plain.size() && std::equal(got.begin(), got.end(), plain.begin()));
  if (!altered) check(got.size() == plain.size());
  return 0;
}
