// SPDX-License-Identifier: BSD-3-Clause
// A test's own TLS data lane: a TCP connection to a data port with an
// OpenSSL client on it (the pre-shared key of an ssh-mode session, or a
// certificate of the service's CA), the lane hello inside TLS, and raw data
// requests -- or raw TLS records, cut short or altered, for the hostile
// cases.
#ifndef RPMEM_TESTS_INTEGRATION_TLS_PEER_H
#define RPMEM_TESTS_INTEGRATION_TLS_PEER_H

#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/tls_stream.h"
#include "tests/integration/raw_peer.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

namespace rpmem_test {

namespace tcp = rpmem::transport::tcp;

// A client context with `who`'s certificate and key from `dir`, trusting
// dir/ca.crt (service mode).
inline std::shared_ptr<SSL_CTX> cert_client_context(const std::string &dir,
                                                    const std::string &who) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return nullptr;
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (SSL_CTX_load_verify_locations(ctx.get(), (dir + "/ca.crt").c_str(), nullptr) != 1 ||
      SSL_CTX_use_certificate_chain_file(ctx.get(), (dir + "/" + who + ".crt").c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx.get(), (dir + "/" + who + ".key").c_str(),
                                  SSL_FILETYPE_PEM) != 1)
    return nullptr;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return ctx;
}

inline std::shared_ptr<SSL_CTX> psk_client_context(const proto::Bytes &psk) {
  std::string why;
  return tcp::make_psk_context(false, psk, why);
}

// The lane hello through `peer` (a TlsPeer or SealedPeer); the target's
// 8-byte answer in `reply` (0: admitted).
template <typename Peer>
bool lane_hello(Peer &peer, const proto::Secret &secret, uint32_t lane, uint32_t nlanes,
                uint32_t &reply, uint16_t epoch = 0) {
  const proto::Bytes h = lane_hello_bytes(secret, lane, nlanes, epoch);
  uint8_t r[proto::kLaneHelloReplySize];
  if (!peer.send(h.data(), h.size()) || !peer.recv(r, sizeof(r))) return false;
  reply = static_cast<uint32_t>(r[0] | r[1] << 8 | r[2] << 16 | r[3] << 24);
  return true;
}

// The bytes of a persist request of `bytes` at `offset`.
inline proto::Bytes persist_request_bytes(uint64_t offset, const proto::Bytes &bytes) {
  uint8_t hdr[proto::kDataRequestSize];
  proto::encode(proto::DataRequest{proto::DataOp::kPersist, 0, offset, bytes.size()}, hdr);
  proto::Bytes all(hdr, hdr + sizeof(hdr));
  all.insert(all.end(), bytes.begin(), bytes.end());
  return all;
}

// A persist of `bytes` at `offset` through `peer`; its reply status, or -1
// when none came.
template <typename Peer>
int lane_persist(Peer &peer, uint64_t offset, const proto::Bytes &bytes) {
  const proto::Bytes all = persist_request_bytes(offset, bytes);
  uint8_t r[proto::kDataReplySize];
  if (!peer.send(all.data(), all.size()) || !peer.recv(r, sizeof(r))) return -1;
  auto reply = proto::decode_data_reply(r);
  return reply ? static_cast<int>(reply->status) : -1;
}

// One TLS connection to 127.0.0.1:port (blocking waits, bounded).
class TlsPeer {
 public:
  TlsPeer(uint16_t port, const std::shared_ptr<SSL_CTX> &ctx) {
    fd_ = connect_port(port);
    if (fd_ < 0 || !ctx) return;
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    SSL *ssl = SSL_new(ctx.get());
    stream_ = std::make_unique<tcp::TlsStream>(ssl, fd_);
    tcp::attach_socket(ssl, fd_);
    // Records in user space, so that seal() can make one by hand (with
    // kernel TLS, as in the VM's kernel, the socket writes them).
    SSL_clear_options(ssl, SSL_OP_ENABLE_KTLS);
    SSL_set_connect_state(ssl);
    ok_ = !tcp::client_handshake(ssl, fd_, 5000, why_);
  }
  ~TlsPeer() {
    if (!stream_ && fd_ >= 0) ::close(fd_);
  }
  TlsPeer(const TlsPeer &) = delete;
  TlsPeer &operator=(const TlsPeer &) = delete;

  bool handshaken() const { return ok_; }
  const std::string &why() const { return why_; }
  int fd() const { return fd_; }
  SSL *ssl() const { return stream_ ? stream_->ssl() : nullptr; }

  bool send(const void *p, size_t n) {
    iovec iov{const_cast<void *>(p), n};
    return ok_ && !tcp::stream_send_all(*stream_, &iov, 1, 5000);
  }
  bool recv(void *p, size_t n, int timeout_ms = 5000) {
    return ok_ && !tcp::stream_recv_all(*stream_, p, n, timeout_ms);
  }

  // The lane hello (at `epoch`); the target's 8-byte answer in `reply`
  // (0: admitted).
  bool hello(const proto::Secret &secret, uint32_t lane, uint32_t nlanes, uint32_t &reply,
             uint16_t epoch = 0) {
    return lane_hello(*this, secret, lane, nlanes, reply, epoch);
  }

  // A persist of `bytes` at `offset`; its reply status, or -1 when none came.
  int persist(uint64_t offset, const proto::Bytes &bytes) {
    return lane_persist(*this, offset, bytes);
  }

  // The TLS records that `bytes` make, not sent: the test sends them, or
  // a part of them, or altered, with ::send on fd().
  proto::Bytes seal(const proto::Bytes &bytes) {
    BIO *mem = BIO_new(BIO_s_mem());
    BIO *sock = SSL_get_wbio(ssl());
    BIO_up_ref(sock);
    SSL_set0_wbio(ssl(), mem);
    size_t written = 0;
    SSL_write_ex(ssl(), bytes.data(), bytes.size(), &written);
    char *p = nullptr;
    long n = BIO_get_mem_data(mem, &p);
    proto::Bytes out(p, p + (n > 0 ? n : 0));
    SSL_set0_wbio(ssl(), sock);  // frees mem
    return out;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::string why_;
  std::unique_ptr<tcp::TlsStream> stream_;  // owns fd_ once made
};

// A sealed data lane of the test's own: lane `lane` of an ssh-mode session
// keyed by `master` (its lane_psk), at `epoch`; with `nonces` (a session of
// protocol minor 9) each connection's keys take a nonce of each end.
class SealedPeer {
 public:
  SealedPeer(uint16_t port, const proto::Bytes &master, uint32_t lane, uint16_t epoch = 0,
             bool nonces = true)
      : lane_(lane), epoch_(epoch) {
    keys_.on = true;
    keys_.nonces = nonces;
    std::copy_n(master.begin(), std::min(master.size(), keys_.master.size()), keys_.master.begin());
    fd_ = connect_port(port);
    if (fd_ < 0) return;
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    stream_ = tcp::SealedStream::client(fd_, keys_, lane, epoch);
  }
  SealedPeer(const SealedPeer &) = delete;
  SealedPeer &operator=(const SealedPeer &) = delete;

  int fd() const { return fd_; }
  const tcp::SealKeys &keys() const { return keys_; }
  const tcp::SealNonce &client_nonce() const { return stream_->client_nonce(); }
  const tcp::SealNonce &target_nonce() const { return stream_->target_nonce(); }
  bool send(const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    sent_.emplace_back(b, b + n);
    iovec iov{const_cast<void *>(p), n};
    return stream_ && !tcp::stream_send_all(*stream_, &iov, 1, 5000);
  }
  bool recv(void *p, size_t n, int timeout_ms = 5000) {
    return stream_ && !tcp::stream_recv_all(*stream_, p, n, timeout_ms);
  }
  bool hello(const proto::Secret &secret, uint32_t lane, uint32_t nlanes, uint32_t &reply) {
    return lane_hello(*this, secret, lane, nlanes, reply, epoch_);
  }
  int persist(uint64_t offset, const proto::Bytes &bytes) {
    return lane_persist(*this, offset, bytes);
  }
  // The frames that `bytes` would make as this lane's next message, not
  // sent (the messages before it are sealed again, on a socketpair, by a
  // stream of the same nonces, to reach the same keys and frame numbers):
  // the test sends them, cut short or altered.
  proto::Bytes seal(const proto::Bytes &bytes) { return twin_wire(bytes, false); }
  // What a recorder on the path saw of this connection's first message
  // (its clear prefix and its hello): bytes to replay.
  proto::Bytes recorded_hello() { return twin_wire({}, true); }

 private:
  proto::Bytes twin_wire(const proto::Bytes &next, bool hello_only) {
    int sv[2];
    if (sent_.empty() || ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return {};
    int big = 8 << 20;
    ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    ::setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    const tcp::SealNonce nc = client_nonce();
    auto twin = tcp::SealedStream::client(sv[0], keys_, lane_, epoch_, &nc);
    auto drain = [&] {
      proto::Bytes out(16 << 20);
      const ssize_t n = ::recv(sv[1], out.data(), out.size(), 0);
      out.resize(n > 0 ? static_cast<size_t>(n) : 0);
      return out;
    };
    auto send_one = [&](const proto::Bytes &m) {
      iovec iov{const_cast<uint8_t *>(m.data()), m.size()};
      tcp::stream_send_all(*twin, &iov, 1, 5000);
    };
    send_one(sent_[0]);  // the hello
    proto::Bytes out = drain();
    if (!hello_only) {
      if (keys_.nonces) {  // the target's nonce, as the lane took it
        ::send(sv[1], target_nonce().data(), target_nonce().size(), 0);
        uint8_t none = 0;
        size_t got = 0;
        [[maybe_unused]] auto ec = twin->recv_nowait(&none, 0, got);
      }
      for (size_t i = 1; i < sent_.size(); ++i) send_one(sent_[i]);
      drain();
      send_one(next);
      out = drain();
    }
    ::close(sv[1]);
    return out;
  }

  int fd_ = -1;
  uint32_t lane_;
  uint16_t epoch_;
  tcp::SealKeys keys_;
  std::vector<proto::Bytes> sent_;
  std::unique_ptr<tcp::SealedStream> stream_;  // owns fd_ once made
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_TLS_PEER_H
