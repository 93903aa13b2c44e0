// SPDX-License-Identifier: BSD-3-Clause
// TlsStream on a socket pair: the pre-shared key handshake stepped without
// waiting, gathered and large sends that meet a full socket and are retried
// with the same bytes, read-ahead records that has_buffered_input() must
// report, a wrong key, EOF and a peer that is gone.
#include "common/transport/tcp/tls_stream.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <vector>

namespace rpmem::transport::tcp {
namespace {

struct Pair {
  std::shared_ptr<SSL_CTX> cctx, sctx;  // outlive the streams (declared first)
  std::unique_ptr<TlsStream> client, server;
  int cfd = -1, sfd = -1;
};

// Both ends of a socket pair, each with its own key (`server_key` differs
// from the client's for a handshake that must fail). Small socket buffers,
// so that sends meet a full socket.
bool make_pair(Pair &p, const std::vector<uint8_t> &key, const std::vector<uint8_t> &server_key,
               uint64_t key_update_bytes = kKeyUpdateBytes) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
  int small = 16384;
  for (int fd : sv) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  std::string why;
  p.cctx = make_psk_context(false, key, why);
  p.sctx = make_psk_context(true, server_key, why);
  if (!p.cctx || !p.sctx) return false;
  SSL *c = SSL_new(p.cctx.get());
  SSL *s = SSL_new(p.sctx.get());
  p.client = std::make_unique<TlsStream>(c, sv[0], key_update_bytes);
  p.server = std::make_unique<TlsStream>(s, sv[1]);
  p.cfd = sv[0];
  p.sfd = sv[1];
  if (!attach_socket(c, sv[0]) || !attach_socket(s, sv[1])) return false;
  SSL_set_connect_state(c);
  SSL_set_accept_state(s);
  return true;
}

// Steps both handshakes in turn; {} when both are done, else the error.
std::error_code handshake(Pair &p) {
  bool cdone = false, sdone = false;
  for (int i = 0; i < 100 && !(cdone && sdone); ++i) {
    short want = 0;
    const char *why = nullptr;
    if (!cdone) {
      auto ec = handshake_step(p.client->ssl(), want, why);
      if (!ec)
        cdone = true;
      else if (ec.value() != EAGAIN)
        return ec;
    }
    if (!sdone) {
      auto ec = handshake_step(p.server->ssl(), want, why);
      if (!ec)
        sdone = true;
      else if (ec.value() != EAGAIN)
        return ec;
    }
  }
  return cdone && sdone ? std::error_code{} : std::make_error_code(std::errc::timed_out);
}

const std::vector<uint8_t> kKey(32, 0x42);

TEST(TlsStream, PskHandshakeIsTls13WithAes128Gcm) {
  Pair p;
  ASSERT_TRUE(make_pair(p, kKey, kKey));
  ASSERT_FALSE(handshake(p));
  EXPECT_STREQ(SSL_get_version(p.server->ssl()), "TLSv1.3");
  EXPECT_STREQ(SSL_get_cipher_name(p.server->ssl()), "TLS_AES_128_GCM_SHA256");
  EXPECT_STREQ(record_layer(p.server->ssl()), "user-space TLS");  // a socket pair: never kTLS
}

TEST(TlsStream, AnotherKeyFailsTheHandshake) {
  Pair p;
  auto other = kKey;
  other[7] ^= 1;
  ASSERT_TRUE(make_pair(p, kKey, other));
  auto ec = handshake(p);
  EXPECT_EQ(ec.value(), EPROTO);
}

TEST(TlsStream, LargeGatheredSendsArriveWholeThroughAFullSocket) {
  Pair p;
  ASSERT_TRUE(make_pair(p, kKey, kKey));
  ASSERT_FALSE(handshake(p));
  // A header, a small piece and 3 MiB: the small ones are gathered into the
  // first record, the rest goes straight from the buffer.
  std::vector<uint8_t> hdr(24), small(40), big(3 << 20);
  for (size_t i = 0; i < hdr.size(); ++i) hdr[i] = static_cast<uint8_t>(i);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint8_t>(100 + i);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  std::vector<uint8_t> expect;
  for (auto *v : {&hdr, &small, &big}) expect.insert(expect.end(), v->begin(), v->end());
  iovec iov[3] = {{hdr.data(), hdr.size()}, {small.data(), small.size()}, {big.data(), big.size()}};
  iovec *unsent = iov;
  int n = 3;
  std::vector<uint8_t> got(expect.size());
  size_t have = 0;
  int full = 0;
  for (int round = 0; round < 100000 && (n > 0 || have < got.size()); ++round) {
    if (n > 0) {
      ASSERT_FALSE(p.client->send_nowait(unsent, n));
      if (n > 0) ++full;  // the socket took only part: retried next round
    }
    size_t k = 0;
    ASSERT_FALSE(
        p.server->recv_nowait(got.data() + have, std::min<size_t>(got.size() - have, 5000), k));
    have += k;
  }
  EXPECT_EQ(n, 0);
  ASSERT_EQ(have, got.size());
  EXPECT_EQ(got, expect);
  EXPECT_GT(full, 0) << "the socket never filled up: the retry path was not taken";
}

// KeyUpdate messages the server receives.
int g_key_updates = 0;
void count_key_updates(int write_p, int, int content_type, const void *buf, size_t len, SSL *,
                       void *) {
  if (!write_p && content_type == SSL3_RT_HANDSHAKE && len > 0 &&
      static_cast<const uint8_t *>(buf)[0] == SSL3_MT_KEY_UPDATE)
    ++g_key_updates;
}

TEST(TlsStream, TheSenderMovesToANewKeyAfterItsBytesPerKey) {
  Pair p;
  ASSERT_TRUE(make_pair(p, kKey, kKey, 1 << 20));  // a new key every MiB
  ASSERT_FALSE(handshake(p));
  g_key_updates = 0;
  SSL_set_msg_callback(p.server->ssl(), count_key_updates);
  std::vector<uint8_t> data(5 << 20), got(data.size());
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  iovec iov{data.data(), data.size()};
  iovec *u = &iov;
  int n = 1;
  size_t have = 0;
  for (int round = 0; round < 100000 && (n > 0 || have < got.size()); ++round) {
    if (n > 0) {
      ASSERT_FALSE(p.client->send_nowait(u, n));
    }
    size_t k = 0;
    ASSERT_FALSE(p.server->recv_nowait(got.data() + have, got.size() - have, k));
    have += k;
  }
  ASSERT_EQ(have, got.size());
  EXPECT_EQ(got, data);
  // The first four MiB each end a key; the fifth's update is pending.
  EXPECT_GE(g_key_updates, 4);
  EXPECT_LE(g_key_updates, 5);
}

TEST(TlsStream, RecordsReadAheadAreReportedAsBufferedInput) {
  Pair p;
  ASSERT_TRUE(make_pair(p, kKey, kKey));
  ASSERT_FALSE(handshake(p));
  // Three separate records, all in the socket before the server reads.
  for (int b : {1, 2, 3}) {
    uint8_t one[100];
    std::memset(one, b, sizeof(one));
    iovec iov{one, sizeof(one)};
    iovec *u = &iov;
    int n = 1;
    ASSERT_FALSE(p.client->send_nowait(u, n));
    ASSERT_EQ(n, 0);
  }
  // Exactly the first record: nothing decrypted is left over, but the other
  // two were read ahead from the socket, which shows nothing of them.
  uint8_t buf[100];
  size_t got = 0;
  ASSERT_FALSE(p.server->recv_nowait(buf, sizeof(buf), got));
  EXPECT_EQ(got, sizeof(buf));
  EXPECT_EQ(SSL_pending(p.server->ssl()), 0);
  EXPECT_TRUE(p.server->has_buffered_input());
  std::vector<uint8_t> rest(300);
  ASSERT_FALSE(p.server->recv_nowait(rest.data(), rest.size(), got));
  EXPECT_EQ(got, 200u);
  EXPECT_EQ(rest[199], 3);
  EXPECT_FALSE(p.server->has_buffered_input());
}

TEST(TlsStream, EofIsEconnresetAndAGonePeerIsNotASignal) {
  Pair p;
  ASSERT_TRUE(make_pair(p, kKey, kKey));
  ASSERT_FALSE(handshake(p));
  // SIGPIPE would end this test program: librpmem must never raise it.
  ::shutdown(p.sfd, SHUT_RDWR);
  uint8_t big[65536] = {};
  iovec iov{big, sizeof(big)};
  iovec *u = &iov;
  int n = 1;
  std::error_code ec;
  for (int i = 0; i < 10 && !ec; ++i) ec = p.client->send_nowait(u, n);
  EXPECT_EQ(ec.value(), ECONNRESET);
  size_t got = 0;
  EXPECT_EQ(p.client->recv_nowait(big, sizeof(big), got).value(), ECONNRESET);
}

}  // namespace
}  // namespace rpmem::transport::tcp
