// SPDX-License-Identifier: BSD-3-Clause
// rpmemd's service mode: TLS listener, one thread and one Session per client.
#include "rpmemd/service.h"

#include "common/error.h"
#include "common/log.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tls_stream.h"
#include "common/transport/transport.h"
#include "rpmemd/control_io.h"
#include "rpmemd/pool_store.h"
#include "rpmemd/session.h"
#include "rpmemd/tls_policy.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <thread>

#ifdef RPMEM_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace rpmemd {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;
using rpmem::errc;
using rpmem::SetupError;

namespace {

// A message to systemd's notification socket ($NOTIFY_SOCKET), as
// sd_notify() sends it but without ever waiting: a datagram socket whose
// reader lags (a full queue, max_dgram_qlen) would block sd_notify, and
// with it the event loop. A message that cannot go now is dropped.
void notify(const char *state) {
  const char *path = std::getenv("NOTIFY_SOCKET");
  if (!path || (path[0] != '/' && path[0] != '@')) return;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = std::strlen(path);
  if (n >= sizeof(a.sun_path)) return;
  std::memcpy(a.sun_path, path, n);
  if (a.sun_path[0] == '@') a.sun_path[0] = '\0';  // the abstract namespace
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
  if (::sendto(fd, state, std::strlen(state), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<sockaddr *>(&a), len) < 0)
    RPMEM_LOG_DEBUG("service: notification '%s' not sent: %s", state, std::strerror(errno));
  ::close(fd);
}

// Sockets systemd passed (socket activation): the first one, or -1.
int activated_socket() {
#ifdef RPMEM_HAVE_SYSTEMD
  if (sd_listen_fds(1) >= 1) return SD_LISTEN_FDS_START;
#endif
  return -1;
}

// SIGHUP through a descriptor (rereads tls-crl), blocked before any client
// thread starts.
int hangup_signal_fd() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return ::signalfd(-1, &sigs, SFD_CLOEXEC);
}

}  // namespace

bool split_listen(const std::string &listen, std::string &address, unsigned short &port) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 >= listen.size()) return false;
  address = listen.substr(0, colon);
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  const std::string p = listen.substr(colon + 1);
  if (p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5) return false;
  unsigned long n = std::stoul(p);
  if (n == 0 || n > 65535) return false;
  port = static_cast<unsigned short>(n);
  return !address.empty();
}

int Service::run() {
  ServerTls tls(config_);
  boost::system::error_code ec;

  int listen_fd = activated_socket();
  if (listen_fd >= 0) {
    RPMEM_LOG_NOTICE("service: listening on the socket systemd passed");
  } else {
    std::string address;
    unsigned short port = 0;
    if (!split_listen(config_.service_listen, address, port))
      throw SetupError(EINVAL, "invalid service-listen '" + config_.service_listen + "'");
    asio::io_context io;
    tcp::acceptor acceptor(io);
    auto addr = asio::ip::make_address(address, ec);
    if (ec) throw SetupError(EINVAL, "invalid service-listen address '" + address + "'");
    tcp::endpoint ep(addr, port);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw SetupError(ec.value(),
                       "cannot listen on " + config_.service_listen + ": " + ec.message());
    listen_fd = acceptor.release();
    RPMEM_LOG_NOTICE("service: listening on %s", config_.service_listen.c_str());
  }

  // A connection is handed to this loop once its first bytes came, or
  // after the handshake's time: strangers who connect and say nothing (or
  // connect and leave) wait in the kernel, not in the service's slots.
  const int defer = static_cast<int>(config_.handshake_timeout);
  if (::setsockopt(listen_fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) != 0)
    RPMEM_LOG_WARN("service: TCP_DEFER_ACCEPT: %s", std::strerror(errno));

  const int sfd = termination_signal_fd();
  if (sfd < 0) throw SetupError(errno, "signalfd failed");
  const int hfd = hangup_signal_fd();
  if (hfd < 0) throw SetupError(errno, "signalfd failed");
  Loop loop(*this, tls, listen_fd, sfd, hfd);
  notify("READY=1");
  loop.run();
  ::close(hfd);
  ::close(sfd);
  RPMEM_LOG_NOTICE("service: stopped");
  return 0;
}

// One control connection: its TLS stream, the deadline of its handshake,
// and, once authenticated, the thread of its session.
struct Service::Conn {
  Conn(asio::io_context &io, ssl::context &ctx) : stream(io, ctx), timer(io), record_timer(io) {}
  unsigned id = 0;
  std::string peer;   // numeric address
  std::string local;  // the address the client reached
  std::string name;   // the certificate's client name, once authenticated
  ssl::stream<tcp::socket> stream;
  asio::steady_timer timer;         // the handshake's deadline
  asio::steady_timer record_timer;  // the next look for a whole first record
  int fd = -1;                      // the socket, for shutdown() from the loop
  std::thread thread;
  bool in_session = false;
  std::string refused;  // why the TLS policy refused the client's certificate
  // Lanes granted to all sessions of this certificate (max-lanes-per-client).
  Admission::LaneCounter client_lanes;
  std::shared_ptr<SessionStatus> status;  // once in a session
};

namespace {

// A TLS stream as a session's control channel, on the session's thread.
// After the handshake the connection leaves Asio: OpenSSL reads and writes
// the socket itself (blocking), so that a wait for input can poll the socket
// and the session's wake-up descriptors (a failed lane, the idle bound)
// together -- bytes OpenSSL holds are asked with SSL_pending(); nothing
// else buffers them. The client sends nothing between its handshake and our
// hello, so no byte Asio read is left behind.
class TlsControlStream final : public ControlStream {
 public:
  explicit TlsControlStream(Service::Conn &c) : ssl_(c.stream.native_handle()), fd_(c.fd) {
    SSL_set_fd(ssl_, fd_);  // the socket BIO does not close fd_
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  }
  std::error_code read_frame(proto::FrameHeader &hdr, proto::Bytes &payload, int &woken) override {
    return read_frame_with([&](uint8_t *buf, size_t n) { return read_exact(buf, n, woken); }, hdr,
                           payload);
  }
  std::error_code write_all(const proto::Bytes &bytes) override {
    size_t off = 0;
    while (off < bytes.size()) {
      const int n = SSL_write(ssl_, bytes.data() + off, static_cast<int>(bytes.size() - off));
      if (n <= 0) return gone(n);
      off += static_cast<size_t>(n);
    }
    return {};
  }
  void add_wake_fd(int fd) override { wake_.push_back(fd); }
  // close_notify, so that the client sees an orderly end.
  void shutdown() noexcept { SSL_shutdown(ssl_); }

 private:
  std::error_code read_exact(uint8_t *buf, size_t n, int &woken) {
    while (n > 0) {
      if (SSL_pending(ssl_) == 0)
        if (auto ec = wait_readable(woken)) return ec;
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
  // Until the socket has input: EINTR with `woken` when a wake-up
  // descriptor comes first.
  std::error_code wait_readable(int &woken) {
    std::vector<pollfd> p;
    p.push_back({fd_, POLLIN, 0});
    for (int fd : wake_) p.push_back({fd, POLLIN, 0});
    for (;;) {
      if (::poll(p.data(), p.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return errc(errno);
      }
      for (size_t i = 1; i < p.size(); ++i)
        if (p[i].revents) {
          woken = p[i].fd;
          return errc(EINTR);
        }
      return {};
    }
  }
  std::error_code gone(int rc) {
    // EOF, a TLS close, a reset or a shut-down socket: the client is gone.
    RPMEM_LOG_DEBUG("control connection: TLS error %d", SSL_get_error(ssl_, rc));
    ERR_clear_error();
    return errc(ECONNRESET);
  }
  SSL *ssl_;
  int fd_;
  std::vector<int> wake_;
};

}  // namespace

Service::Loop::Loop(Service &service, ServerTls &tls, int listen_fd, int signal_fd, int hangup_fd)
    : service_(service),
      config_(service.config_),
      tls_(tls),
      acceptor_(io_),
      signals_(io_, ::dup(signal_fd)),
      hangups_(io_, ::dup(hangup_fd)),
      backoff_(io_),
      admission_(config_),
      tick_(io_),
      started_ns_(rpmem::transport::LaneCounters::now_ns()) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(listen_fd, reinterpret_cast<sockaddr *>(&ss), &len);
  boost::system::error_code ec;
  acceptor_.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listen_fd, ec);
  if (ec) {
    ::close(listen_fd);
    throw SetupError(ec.value(), "service: cannot use the listening socket: " + ec.message());
  }
  acceptor_.non_blocking(true, ec);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

  std::string path = config_.status_socket;
  if (!config_.status_socket_set)
    if (const char *dir = std::getenv("RUNTIME_DIRECTORY"); dir && *dir)
      path = std::string(dir).substr(0, std::string(dir).find(':')) + "/status.sock";
  if (!config_.metrics_listen.empty() && !config_.metrics_public &&
      !is_loopback_listen(config_.metrics_listen))
    throw SetupError(EINVAL, "metrics-listen " + config_.metrics_listen +
                                 " is not a loopback address (metrics-public = yes allows it)");
  if (!path.empty() || !config_.metrics_listen.empty())
    status_ = std::make_unique<StatusServer>(
        io_, path, config_.status_group, config_.metrics_listen, [this](StatusServer::What what) {
          const StatusSnapshot s = snapshot();
          return what == StatusServer::What::kText   ? render_text(s)
                 : what == StatusServer::What::kJson ? render_json(s)
                                                     : render_metrics(s);
        });
#ifdef RPMEM_HAVE_SYSTEMD
  if (sd_watchdog_enabled(0, &watchdog_usec_) <= 0) watchdog_usec_ = 0;
#endif
}

Service::Loop::~Loop() {
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

void Service::Loop::run() {
  accept_next();
  wait_signal();
  wait_hangup();
  tick();
  // Every handler catches what it can throw; an exception here would be a
  // bug, and the service ends cleanly rather than abort.
  for (;;) {
    try {
      io_.run();
      break;
    } catch (const std::exception &e) {
      RPMEM_LOG_ERR("service: %s", e.what());
      stop();
    }
  }
  for (auto &c : conns_)  // sessions still running after stop()
    if (c->thread.joinable()) c->thread.join();
  conns_.clear();
}

// SIGHUP: the revocation lists are reread; handshakes from then on use them.
void Service::Loop::wait_hangup() {
  hangups_.async_wait(
      asio::posix::descriptor_base::wait_read, [this](const boost::system::error_code &ec) {
        if (ec) return;
        signalfd_siginfo info;
        if (::read(hangups_.native_handle(), &info, sizeof(info)) > 0) {
          std::string why;
          if (tls_.reload_crl(why))
            RPMEM_LOG_NOTICE("service: SIGHUP: certificate revocation lists reread");
          else
            RPMEM_LOG_ERR("service: SIGHUP: %s; the previous lists stay in use", why.c_str());
        }
        wait_hangup();
      });
}

void Service::Loop::wait_signal() {
  signals_.async_wait(
      asio::posix::descriptor_base::wait_read, [this](const boost::system::error_code &ec) {
        if (ec) return;
        RPMEM_LOG_NOTICE("service: signal received, making open pools durable and exiting");
        notify("STOPPING=1");
        stop();
      });
}

void Service::Loop::stop() {
  stopping_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  signals_.close(ignored);
  hangups_.close(ignored);
  backoff_.cancel();
  tick_.cancel();
  if (status_) status_->stop();
  // Handshakes end now; sessions see their socket shut down, make their
  // pool durable, unlock it and end; their threads are joined in run().
  for (auto &c : conns_) {
    if (c->in_session)
      ::shutdown(c->fd, SHUT_RDWR);
    else
      c->stream.next_layer().close(ignored);
    c->timer.cancel();
  }
}

void Service::Loop::accept_next() {
  if (stopping_) return;
  acceptor_.async_accept([this](const boost::system::error_code &ec, tcp::socket socket) {
    if (stopping_) return;
    if (ec == asio::error::no_descriptors || ec.value() == ENFILE) {
      // Out of descriptors: take one connection off the queue with the spare
      // descriptor and close it, and pause, so that the loop does not spin.
      if (spare_fd_ >= 0) {
        ::close(spare_fd_);
        int victim = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
        if (victim >= 0) ::close(victim);
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      }
      refusals_.refused("?", "out of file descriptors");
      backoff_.expires_after(std::chrono::milliseconds(50));
      backoff_.async_wait([this](const boost::system::error_code &e) {
        if (!e) accept_next();
      });
      return;
    }
    if (!ec) admit(std::move(socket));
    accept_next();
  });
}

namespace {

// An address as text, an IPv4-mapped IPv6 one as IPv4 (as the data
// listener prints its peers).
std::string plain_address(const asio::ip::address &a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).to_string();
  return a.to_string();
}

}  // namespace

void Service::Loop::admit(tcp::socket socket) {
  boost::system::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  if (ec) return;  // gone already
  const std::string peer = plain_address(remote.address());
  // One that sent all it will send, and not a whole first record, can
  // never start a handshake: it goes now, before it costs a slot or a TLS
  // state (a crowd that connects, sends a byte and leaves is otherwise a
  // handshake's work for this loop each, and the listen queue overflows).
  const int fd = socket.native_handle();
  if (!rpmem::transport::tcp::tls_record_buffered(fd) && rpmem::transport::tcp::peer_hung_up(fd))
    return refusals_.refused(peer, "gone before its first TLS record");
  // A silent connection may have its first bytes waiting: this loop takes
  // new connections before it reads, so look.
  const Admission::Arrival arrival = admission_.on_connection(peer, [this](Admission::Id id) {
    auto it = std::find_if(conns_.begin(), conns_.end(),
                           [id](const std::shared_ptr<Conn> &c) { return c->id == id; });
    return it != conns_.end() && (*it)->stream.next_layer().is_open() &&
           rpmem::transport::tcp::tls_record_buffered((*it)->fd);
  });
  for (Admission::Id id : arrival.dropped) drop(id);
  if (arrival.refused) return refusals_.refused(peer, arrival.refused);
  std::shared_ptr<Conn> c;
  try {
    c = std::make_shared<Conn>(io_, tls_.context());
  } catch (const std::exception &) {
    // A literal: RefusalLog keeps the reason's address for later counts.
    return refusals_.refused(peer, "out of memory");
  }
  c->peer = peer;
  c->local = plain_address(socket.local_endpoint(ec).address());
  c->fd = socket.native_handle();
  rpmem::transport::tcp::set_nodelay(c->fd);
  rpmem::transport::tcp::set_peer_timeout(c->fd, config_.peer_timeout);
  c->stream.next_layer() = std::move(socket);
  ServerTls::prepare_connection(c->stream.native_handle(), &c->refused);
  c->id = admission_.on_handshake_start(peer);
  conns_.push_back(c);
  c->timer.expires_after(std::chrono::seconds(config_.handshake_timeout));
  c->timer.async_wait([this, c](const boost::system::error_code &e) {
    if (e || c->in_session) return;
    refusals_.refused(c->peer, "TLS handshake not done in time (handshake-timeout)");
    boost::system::error_code ignored;
    c->stream.next_layer().close(ignored);  // the handshake's handler ends it
  });
  await_first_record(c);
}

// The handshake starts once the client's first TLS record is here whole
// (its ClientHello, sent in one piece); until then the connection counts
// as silent, the first to go when room is needed, and costs no handshake.
// A part of a record is looked at again every 20 ms, within the deadline.
void Service::Loop::await_first_record(const std::shared_ptr<Conn> &c) {
  auto &sock = c->stream.next_layer();
  if (stopping_ || !sock.is_open()) return handshaken(c, asio::error::operation_aborted);
  if (rpmem::transport::tcp::tls_record_buffered(c->fd)) {
    admission_.on_first_bytes(c->id);
    c->stream.async_handshake(ssl::stream_base::server,
                              [this, c](const boost::system::error_code &e) { handshaken(c, e); });
    return;
  }
  char b;
  const ssize_t r = ::recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
    return handshaken(c, asio::error::eof);  // gone before it said anything
  if (r < 0) {                               // nothing yet: wake when something comes
    sock.async_wait(tcp::socket::wait_read, [this, c](const boost::system::error_code &e) {
      if (e) return handshaken(c, e);
      await_first_record(c);
    });
    return;
  }
  c->record_timer.expires_after(std::chrono::milliseconds(20));
  c->record_timer.async_wait([this, c](const boost::system::error_code &e) {
    if (e) return handshaken(c, e);
    await_first_record(c);
  });
}

void Service::Loop::drop(Admission::Id id) {
  auto it = std::find_if(conns_.begin(), conns_.end(),
                         [id](const std::shared_ptr<Conn> &c) { return c->id == id; });
  if (it == conns_.end()) return;
  Conn &c = **it;
  refusals_.refused(c.peer, "the oldest unauthenticated connection, dropped for a newer one");
  boost::system::error_code ignored;
  // Its handler forgets it, in this round of events: the socket's wait and
  // the timer between looks at a partial record both end now.
  c.stream.next_layer().close(ignored);
  c.record_timer.cancel();
}

void Service::Loop::forget(const std::shared_ptr<Conn> &c) {
  admission_.on_close(c->id);
  std::erase(conns_, c);
}

void Service::Loop::handshaken(const std::shared_ptr<Conn> &c,
                               const boost::system::error_code &ec) {
  admission_.on_handshake_end(c->id);
  c->timer.cancel();
  c->record_timer.cancel();
  // A handshake whose last read or write had completed before the loop
  // closed its socket (dropped for a newer connection, or timed out) still
  // ends in success; the descriptor may be another file's by now.
  if (ec || stopping_ || !c->stream.next_layer().is_open()) {
    if (ec && ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor) {
      RPMEM_LOG_WARN("client %u (%s): TLS handshake failed: %s", c->id, c->peer.c_str(),
                     c->refused.empty() ? ec.message().c_str() : c->refused.c_str());
      refusals_.count(c->refused.empty() ? "TLS handshake failed"
                                         : "TLS handshake failed: certificate refused");
    }
    return forget(c);
  }
  // The TLS policy checked the name in the handshake already.
  auto name = client_name_from_cert(SSL_get0_peer_certificate(c->stream.native_handle()));
  const std::string cn = name ? name.value() : std::string();
  const std::string dir = config_.poolset_dir + "/" + cn;
  struct stat st {};
  const bool has_dir = !cn.empty() && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  Admission::Verdict verdict = admission_.on_authenticated(c->id, cn, has_dir);
  if (verdict.refused) {
    RPMEM_LOG_WARN("client %u (%s): certificate '%s' %s", c->id, c->peer.c_str(), cn.c_str(),
                   verdict.refused);
    refusals_.count(verdict.refused);
    refuse_session(c);
    return;
  }
  c->name = cn;
  c->in_session = true;
  c->client_lanes = std::move(verdict.client_lanes);
  RPMEM_LOG_NOTICE("client %u (%s): '%s' authenticated, pool set directory %s", c->id,
                   c->peer.c_str(), cn.c_str(), dir.c_str());
  try {
    // Its lanes count what they serve only where someone can ask.
    if (status_)
      c->status = std::make_shared<SessionStatus>(c->id, cn, c->peer,
                                                  rpmem::transport::LaneCounters::now_ns());
    ++sessions_started_;
    c->thread = std::thread([this, c] {
      serve(c);
      ::shutdown(c->fd, SHUT_RDWR);  // the client sees the end now
      asio::post(io_, [this, c] { session_done(c); });
    });
  } catch (const std::exception &e) {
    RPMEM_LOG_ERR("client %u (%s): cannot start a session thread: %s", c->id, c->peer.c_str(),
                  e.what());
    admission_.on_session_end(c->id);
    refuse_session(c);
  }
}

// Tells an authenticated client why it is not served (EACCES in the hello),
// then closes.
void Service::Loop::refuse_session(const std::shared_ptr<Conn> &c) {
  auto hello = std::make_shared<proto::Bytes>();
  proto::Hello h;
  h.status = EACCES;
  *hello = proto::encode(h);
  c->in_session = false;
  c->timer.expires_after(std::chrono::seconds(2));
  c->timer.async_wait([c](const boost::system::error_code &e) {
    boost::system::error_code ignored;
    if (!e) c->stream.next_layer().close(ignored);
  });
  asio::async_write(c->stream, asio::buffer(*hello),
                    [this, c, hello](const boost::system::error_code &, size_t) {
                      c->timer.cancel();
                      forget(c);
                    });
}

void Service::Loop::session_done(const std::shared_ptr<Conn> &c) {
  if (c->thread.joinable()) c->thread.join();  // it has posted this: it is ending
  c->in_session = false;
  admission_.on_session_end(c->id);
  if (c->status) ended_[c->name] += c->status->view().totals;
  RPMEM_LOG_INFO("client %u (%s): session ended", c->id, c->peer.c_str());
  forget(c);
}

// The session of an authenticated client, on its own thread: blocking I/O
// on the TLS stream (no asynchronous operation runs on it any more).
void Service::Loop::serve(const std::shared_ptr<Conn> &conn) noexcept {
  Conn &c = *conn;
  try {
    TlsControlStream control(c);
    proto::Hello hello;
    hello.transports = rpmem::transport::available_transports();
    if (control.write_all(proto::encode(hello))) return;
    PoolStore store(config_.poolset_dir + "/" + c.name);
    SessionParams params = session_params(config_);
    params.listen_address = c.local;
    params.peer_address = c.peer;
    params.client_lanes = c.client_lanes;
    params.max_client_lanes = config_.max_lanes_per_client;
    params.status = c.status;
    params.session_tokens = true;
    // TLS lanes: the service's context, and the certificate this client
    // proved it holds, which each of its lanes must present too.
    SSL_CTX *ctx = tls_.context().native_handle();
    if (SSL_CTX_up_ref(ctx) == 1) {
      params.cert_lanes.ctx.reset(ctx, SSL_CTX_free);
      params.cert_lanes.peer_cert.reset(SSL_get1_peer_certificate(c.stream.native_handle()),
                                        X509_free);
      if (!params.cert_lanes.peer_cert) params.cert_lanes.ctx.reset();
    }
    // Sealed lanes: keys bound to this TLS session (called on this thread,
    // the stream's only user now).
    SSL *ssl = c.stream.native_handle();
    params.export_keying_material = [ssl](uint8_t *out, size_t len, const char *label,
                                          const uint8_t *context, size_t context_len) {
      return rpmem::transport::tcp::export_keying_material(ssl, out, len, label, context,
                                                           context_len);
    };
    Session session(store, control, params, -1);
    session.run();
    control.shutdown();
  } catch (const std::exception &e) {
    RPMEM_LOG_ERR("client %u (%s): %s", c.id, c.peer.c_str(), e.what());
  }
}

void Service::Loop::tick() {
  if (stopping_) return;
  const int64_t now = rpmem::transport::LaneCounters::now_ns();
  for (const auto &c : conns_)
    if (c->in_session && c->status) c->status->sample(now);
  const std::string status = "STATUS=" + render_systemd_status(snapshot(false));
  if (status != systemd_status_) {
    notify(status.c_str());
    systemd_status_ = status;
  }
  if (watchdog_usec_) notify("WATCHDOG=1");
  // Once a second, or twice per watchdog interval when that is shorter.
  auto every = std::chrono::microseconds(1000000);
  if (watchdog_usec_ && watchdog_usec_ / 2 < 1000000)
    every = std::chrono::microseconds(std::max<uint64_t>(watchdog_usec_ / 2, 1000));
  tick_.expires_after(every);
  tick_.async_wait([this](const boost::system::error_code &e) {
    if (!e) tick();
  });
}

namespace {

// Descriptors open in this process.
uint64_t open_descriptors() {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

}  // namespace

StatusSnapshot Service::Loop::snapshot(bool detailed) const {
  StatusSnapshot s;
  s.caps = {
      {"max-handshakes", admission_.handshakes(), config_.max_handshakes},
      {"max-connections", admission_.connections(), config_.max_connections},
      {"max-sessions", admission_.sessions(), config_.max_sessions},
  };
  s.refusals = refusals_.totals();
  if (!detailed) return s;
  s.version = RPMEM_VERSION;
  s.now_ns = rpmem::transport::LaneCounters::now_ns();
  s.uptime_s = static_cast<double>(s.now_ns - started_ns_) / 1e9;
  s.sessions_started = sessions_started_;
  s.sessions_reopened = sessions_reopened();
  unsigned per_client = 0;
  long lanes_per_client = 0;
  for (const auto &c : conns_) {
    if (!c->in_session || !c->status) continue;
    s.sessions.push_back(c->status->view());
    per_client = std::max(per_client, admission_.sessions_of(c->name));
    if (auto lanes = admission_.lanes_of(c->name))
      lanes_per_client = std::max(lanes_per_client, lanes->load());
  }
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  s.caps.insert(
      s.caps.end(),
      {{"max-sessions-per-client", per_client, config_.max_sessions_per_client},
       {"max-lanes-per-client", static_cast<uint64_t>(std::max(0L, lanes_per_client)),
        config_.max_lanes_per_client},
       {"descriptors (RLIMIT_NOFILE)", open_descriptors(), static_cast<uint64_t>(rl.rlim_cur)}});
  s.ended.assign(ended_.begin(), ended_.end());
  return s;
}

}  // namespace rpmemd
