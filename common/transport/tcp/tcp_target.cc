// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, target side: the data port's listener.
#include "common/transport/tcp/tcp_target.h"

#include "common/log.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/byte_stream.h"
#include "common/transport/tcp/lane_server.h"
#include "common/transport/tcp/peer_address.h"
#include "common/transport/tcp/sealed_stream.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/spare_descriptor.h"
#include "common/transport/tcp/tls_stream.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

namespace rpmem::transport::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// Connections of one session in their hello at once; more are closed.
constexpr size_t kMaxPendingHellos = 64;
constexpr int kMaxEvents = 64;
// Lane threads of a pool whose persists wait for a disk (at most one per lane).
constexpr unsigned kDiskThreads = 16;

// Every certificate chain passes: a lane's certificate must be the very
// one the control channel's client presented (checked after the handshake),
// and TLS 1.3 made the lane prove it holds its key.
int any_chain(int, X509_STORE_CTX *) { return 1; }

}  // namespace

struct TcpTarget::Hello {
  std::unique_ptr<ByteStream> stream;  // owns the connection
  SSL *ssl = nullptr;                  // TLS lanes: the stream's, until its handshake is done
  SealedStream *sealed = nullptr;      // sealed lanes: the stream
  uint32_t interest = EPOLLIN;
  Clock::time_point deadline;
  std::string peer;  // address:port, for the log
  uint8_t buf[proto::kLaneHelloSize] = {};
  size_t got = 0;
  bool dropped = false;  // for a newer one; freed after this round of events
};

bool TcpTarget::whole_first_message(const Hello &h) {
  const int fd = h.stream->fd();
  if (h.ssl) return !SSL_in_before(h.ssl) || tls_record_buffered(fd);
  if (h.sealed)
    return h.sealed->bytes_received() + bytes_buffered(fd) >=
           h.sealed->first_message_size(proto::kLaneHelloSize);
  return h.got + bytes_buffered(fd) >= proto::kLaneHelloSize;
}

TcpTarget::TcpTarget(TargetPool &pool, TargetParams params)
    : pool_(pool),
      params_(std::move(params)),
      state_(params_.on_fatal),
      admission_(params_.secret, params_.max_lanes,
                 claim_rules(params_.client_minor, params_.tls || params_.seal)) {
  params_.peer_address = normalized(params_.peer_address);
  asio::io_context io;
  tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  tcp::endpoint ep;
  if (params_.listen_address.empty()) {
    ep = tcp::endpoint(tcp::v6(), 0);
  } else {
    auto addr = asio::ip::make_address(params_.listen_address, ec);
    if (ec) throw SetupError(EINVAL, "bad listen address '" + params_.listen_address + "'");
    ep = tcp::endpoint(addr, 0);
  }
  acceptor.open(ep.protocol(), ec);
  if (ec && params_.listen_address.empty()) {  // no IPv6 here: any IPv4 address
    ep = tcp::endpoint(tcp::v4(), 0);
    acceptor.open(ep.protocol(), ec);
  }
  if (!ec && ep.protocol() == tcp::v6() && params_.listen_address.empty())
    acceptor.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw SetupError(ec.value(),
                     "cannot listen on '" + params_.listen_address + "': " + ec.message());
  // A lane is taken once its first bytes came (or after its hello's time):
  // connections that say nothing wait in the kernel, not among the hellos.
  const int defer = static_cast<int>(std::max<long long>(
      1, std::chrono::ceil<std::chrono::seconds>(params_.hello_timeout).count()));
  if (::setsockopt(acceptor.native_handle(), IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer,
                   sizeof(defer)) != 0)
    RPMEM_LOG_WARN("data listener: TCP_DEFER_ACCEPT: %s", strerror(errno));
  port_ = acceptor.local_endpoint().port();
  listen_fd_ = acceptor.release();
  auto fail = [&](const char *what) {
    const int err = errno;
    for (int fd : {listen_fd_, epoll_fd_})
      if (fd >= 0) ::close(fd);
    throw SetupError(err, std::string("data listener: ") + what + ": " + strerror(err));
  };
  if (set_nonblocking(listen_fd_, true)) fail("fcntl failed");
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) fail("epoll_create1 failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_fd_;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) fail("epoll_ctl failed");
  ev.data.ptr = &state_;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, state_.wake_fd(), &ev) != 0) fail("epoll_ctl failed");
  if (!spare_.held()) fail("cannot open /dev/null");
}

TcpTarget::~TcpTarget() {
  stop();
  for (int fd : {listen_fd_, epoll_fd_})
    if (fd >= 0) ::close(fd);
}

void TcpTarget::start() {
  listener_ = std::thread([this] { run(); });
}

void TcpTarget::stop() noexcept {
  if (!state_.request_stop()) return;
  if (listener_.joinable()) listener_.join();
  // The listener is gone: nobody hands over any more.
  for (auto &server : servers_)
    if (server) server->stop();
}

void TcpTarget::fatal(const std::string &why) { state_.fatal(why); }

void TcpTarget::run() noexcept {
  try {
    loop();
  } catch (const std::exception &e) {
    fatal(std::string("data listener: ") + e.what());
  }
  hellos_.clear();  // each closes its connection
  refusals_.flush();
}

void TcpTarget::loop() {
  epoll_event events[kMaxEvents];
  while (!state_.stopping()) {
    int timeout = -1;
    const auto now = Clock::now();
    for (size_t i = 0; i < hellos_.size();) {  // at most kMaxPendingHellos
      if (hellos_[i]->deadline <= now) {
        refusals_.refused(hellos_[i]->peer, "no lane hello in time");
        close_hello(*hellos_[i]);
        continue;
      }
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(hellos_[i]->deadline - now).count();
      timeout = timeout < 0 ? static_cast<int>(left) : std::min(timeout, static_cast<int>(left));
      ++i;
    }
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fatal(std::string("data listener: epoll_wait failed: ") + strerror(errno));
    }
    for (int i = 0; i < n && !state_.stopping(); ++i) {
      void *tag = events[i].data.ptr;
      if (tag == &state_) return;
      if (tag == &listen_fd_) {
        accept_ready();
        continue;
      }
      hello_ready(*static_cast<Hello *>(tag));
    }
    dropped_.clear();  // no event of this round names them any more
  }
}

void TcpTarget::accept_ready() {
  for (unsigned round = 0; round < 64; ++round) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr *>(&ss), &len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: take the connection off the queue with the
        // spare one and close it, so that the listener does not spin on it.
        const int err = errno;
        spare_.shed(listen_fd_);
        refusals_.refused("?", err == EMFILE ? "out of file descriptors (RLIMIT_NOFILE)"
                                             : "out of file descriptors (system-wide)");
      } else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        RPMEM_LOG_WARN("data listener: accept failed: %s", strerror(errno));
      }
      return;
    }
    const std::string address = numeric_address(ss);
    const std::string peer = address + ":" + std::to_string(port_of(ss));
    if (!params_.peer_address.empty() && address != params_.peer_address) {
      ::close(fd);
      refusals_.refused(peer, "not from the session's client address");
      continue;
    }
    if (hellos_.size() >= kMaxPendingHellos) {
      // Room for the newcomer, who may be the client's lane: the oldest
      // connection that has not sent a whole first message goes (a lane
      // sends its hello in one piece; its bytes may wait unread, as this
      // loop takes new connections first), else the oldest.
      auto victim =
          std::find_if(hellos_.begin(), hellos_.end(),
                       [](const std::unique_ptr<Hello> &o) { return !whole_first_message(*o); });
      if (victim == hellos_.end()) victim = hellos_.begin();
      refusals_.refused((*victim)->peer,
                        "the oldest connection in its hello, dropped for a newer one");
      // An event of this round may still name it: it is freed after them.
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, (*victim)->stream->fd(), nullptr);
      (*victim)->dropped = true;
      dropped_.push_back(std::move(*victim));
      hellos_.erase(victim);
    }
    std::unique_ptr<Hello> h;
    try {
      h = std::make_unique<Hello>();
      h->peer = peer;
    } catch (const std::bad_alloc &) {
      ::close(fd);
      refusals_.refused(peer, "out of memory");
      continue;
    }
    if (const char *why = open_stream(*h, fd)) {
      refusals_.refused(peer, why);
      continue;
    }
    h->deadline = Clock::now() + params_.hello_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = h.get();
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      refusals_.refused(peer, strerror(errno));
      continue;
    }
    hellos_.push_back(std::move(h));
  }
}

const char *TcpTarget::open_stream(Hello &h, int fd) {
  if (params_.seal) {
    auto sealed = SealedStream::target(fd, params_.seal, params_.max_lanes);  // owns fd
    h.sealed = sealed.get();
    h.stream = std::move(sealed);
    return nullptr;
  }
  if (!params_.tls) {
    h.stream = std::make_unique<SocketStream>(fd);
    return nullptr;
  }
  SSL *ssl = SSL_new(params_.tls.ctx.get());
  if (!ssl) {
    ::close(fd);
    ERR_clear_error();
    return "out of memory";
  }
  h.stream = std::make_unique<TlsStream>(ssl, fd);  // owns both from here
  h.ssl = ssl;
  if (!attach_socket(ssl, fd)) return "TLS setup failed";
  SSL_set_accept_state(ssl);
  if (params_.tls.peer_cert) {
    SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, any_chain);
    if (SSL_set_ciphersuites(ssl, kLaneCipherSuites) != 1) return "TLS setup failed";
  }
  return nullptr;
}

void TcpTarget::close_hello(Hello &h) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, h.stream->fd(), nullptr);
  std::erase_if(hellos_, [&](const std::unique_ptr<Hello> &p) { return p.get() == &h; });
}

const char *TcpTarget::stable_reason(const char *prefix, const char *reason) {
  try {
    return refusal_texts_.insert(std::string(prefix) + reason).first->c_str();
  } catch (const std::bad_alloc &) {
    return prefix;
  }
}

// A TLS lane: its handshake, stepped on each readiness, then its binding
// to the session's client certificate. False when the lane is refused.
bool TcpTarget::tls_ready(Hello &h) {
  short want = 0;
  const char *why = nullptr;
  std::error_code ec = handshake_step(h.ssl, want, why);
  if (ec.value() == EAGAIN) {
    const uint32_t interest = want == POLLOUT ? EPOLLOUT : EPOLLIN;
    if (interest != h.interest) {
      epoll_event ev{};
      ev.events = interest;
      ev.data.ptr = &h;
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, h.stream->fd(), &ev) == 0) h.interest = interest;
    }
    return true;
  }
  if (ec) {
    refusals_.refused(h.peer, stable_reason("TLS handshake failed: ", why ? why : "?"));
    return false;
  }
  if (params_.tls.peer_cert) {
    X509 *cert = SSL_get0_peer_certificate(h.ssl);
    if (!cert || X509_cmp(cert, params_.tls.peer_cert.get()) != 0) {
      refusals_.refused(h.peer, "TLS certificate is not the one of the session's client");
      return false;
    }
  }
  RPMEM_LOG_DEBUG("data connection from %s: %s, %s, %s", h.peer.c_str(), SSL_get_version(h.ssl),
                  SSL_get_cipher_name(h.ssl), record_layer(h.ssl));
  h.ssl = nullptr;  // done
  if (h.interest != EPOLLIN) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &h;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, h.stream->fd(), &ev) == 0) h.interest = EPOLLIN;
  }
  return true;
}

void TcpTarget::hello_ready(Hello &h) {
  if (h.dropped) return;
  if (h.ssl) {
    if (!tls_ready(h)) return close_hello(h);
    if (h.ssl) return;  // the handshake goes on
  }
  size_t got = 0;
  std::error_code ec = h.stream->recv_nowait(h.buf + h.got, sizeof(h.buf) - h.got, got);
  h.got += got;
  if (ec) {
    refusals_.refused(h.peer, ec.value() != EPROTO ? "no lane hello"
                              : params_.tls        ? "TLS record refused"
                                                   : "sealed frame refused");
    return close_hello(h);
  }
  if (h.got < sizeof(h.buf)) return;  // the rest comes later

  auto hello = proto::decode_lane_hello(h.buf);
  const char *refusal = nullptr;
  bool returned = false;
  if (!hello || hello->major != proto::kMajor)
    refusal = "malformed lane hello";
  else if (h.sealed && (static_cast<int64_t>(hello->lane) != h.sealed->lane() ||
                        hello->epoch != h.sealed->epoch()))
    refusal = "lane hello sealed with another lane's key";
  else
    refusal = admission_.admit(hello->proof, hello->lane, hello->nlanes, hello->epoch, returned);
  if (refusal) {
    refusals_.refused(h.peer, refusal);
    // Sealed under keys without the target's nonce, a refusal would take
    // the key and nonce that sealed the first answer to the connection a
    // replay copies: such a connection is closed unanswered.
    if (h.sealed && !params_.seal.nonces) return close_hello(h);
    uint8_t no[proto::kLaneHelloReplySize];
    proto::encode_lane_hello_reply(EACCES, no);
    iovec iov{no, sizeof(no)};
    iovec *unsent = &iov;
    int n = 1;
    [[maybe_unused]] auto ignored = h.stream->send_nowait(unsent, n);
    return close_hello(h);
  }
  // PMDK's line, once every lane is in (logged before the last reply, so
  // that it comes before anything the client does next).
  if (!returned) state_.lane_in(hello->nlanes);
  // Eight bytes into the empty send buffer of a new connection: the send
  // takes them whole or the connection is already gone.
  uint8_t yes[proto::kLaneHelloReplySize];
  proto::encode_lane_hello_reply(0, yes);
  iovec iov{yes, sizeof(yes)};
  iovec *unsent = &iov;
  int left = 1;
  ec = h.stream->send_nowait(unsent, left);
  if (ec || left != 0) {
    RPMEM_LOG_WARN("lane %u from %s: %s", hello->lane, h.peer.c_str(),
                   ec ? ec.message().c_str() : "the reply did not fit");
    return close_hello(h);
  }
  const int fd = h.stream->fd();
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  const char *security = params_.tls ? " (TLS)" : params_.seal ? " (sealed)" : "";
  if (returned) {
    // A lane whose connection broke or stalled: served on this one from now
    // on (its lane server closes the old one first).
    RPMEM_LOG_NOTICE("lane %u of %u came back from %s%s, epoch %u", hello->lane, hello->nlanes,
                     h.peer.c_str(), security, hello->epoch);
    if (params_.counters) params_.counters->lane_returned();
  } else {
    RPMEM_LOG_INFO("lane %u of %u connected from %s%s", hello->lane, hello->nlanes, h.peer.c_str(),
                   security);
  }
  std::unique_ptr<ByteStream> stream = std::move(h.stream);
  std::erase_if(hellos_, [&](const std::unique_ptr<Hello> &p) { return p.get() == &h; });
  set_nodelay(fd);
  set_peer_timeout(fd, params_.peer_timeout);
  hand_over(std::move(stream), hello->lane);
}

void TcpTarget::hand_over(std::unique_ptr<ByteStream> stream, unsigned lane) {
  if (nservers_ == 0) {
    const unsigned nlanes = admission_.session_nlanes();
    // A thread per CPU computes; on a disk, persists mostly wait for the
    // device, so more threads keep more writes in flight (as many writers
    // would), while SpinSlots keeps the spinning to one per two CPUs.
    const unsigned cap = params_.nthreads                  ? params_.nthreads
                         : pool_.traits().waits_for_device ? std::max(usable_cpus(), kDiskThreads)
                                                           : usable_cpus();
    nservers_ = std::clamp(std::min(nlanes, cap), 1u, params_.max_lanes);
    servers_.resize(nservers_);
    RPMEM_LOG_INFO("%u lanes served by %u worker thread%s", nlanes, nservers_,
                   nservers_ == 1 ? "" : "s");
  }
  auto &server = servers_[lane % nservers_];
  if (!server) {
    server = std::make_unique<LaneServer>(
        pool_, [this](const std::string &why) { fatal(why); },
        params_.persist_method == proto::PersistMethod::kApm, params_.counters);
    std::string why;
    if (server->start(why)) {
      server.reset();
      return fatal("lane worker: " + why);
    }
  }
  server->add(std::move(stream), lane);
}

}  // namespace rpmem::transport::tcp
