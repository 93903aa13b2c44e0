// SPDX-License-Identifier: BSD-3-Clause
// rpmemd's service mode: the listening socket, the event loop (accept,
// signals, stop) and a session's thread for each authenticated client.
// Admission and the TLS handshakes are in service_handshake.cc, the status
// and systemd's tick in service_status.cc.
#include "rpmemd/service.h"

#include "common/error.h"
#include "common/log.h"
#include "common/transport/tcp/tls_stream.h"
#include "common/transport/transport.h"
#include "rpmemd/pool_store.h"
#include "rpmemd/service_conn.h"
#include "rpmemd/session.h"
#include "rpmemd/signal_fd.h"
#include "rpmemd/systemd_notify.h"
#include "rpmemd/tls_control_stream.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>

#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace rpmemd {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;
using rpmem::SetupError;

namespace {

// The socket systemd passed, or one listening on service-listen.
int listen_socket(const Config &config) {
  boost::system::error_code ec;
  int listen_fd = systemd::activated_socket();
  if (listen_fd >= 0) {
    RPMEM_LOG_NOTICE("service: listening on the socket systemd passed");
  } else {
    std::string address;
    unsigned short port = 0;
    if (!split_listen(config.service_listen, address, port))
      throw SetupError(EINVAL, "invalid service-listen '" + config.service_listen + "'");
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
                       "cannot listen on " + config.service_listen + ": " + ec.message());
    listen_fd = acceptor.release();
    RPMEM_LOG_NOTICE("service: listening on %s", config.service_listen.c_str());
  }
  return listen_fd;
}

// metrics-listen, a TCP address that anyone who reaches it may read, is a
// loopback one unless metrics-public says otherwise.
void check_metrics_listen(const Config &config) {
  if (!config.metrics_listen.empty() && !config.metrics_public &&
      !is_loopback_listen(config.metrics_listen))
    throw SetupError(EINVAL, "metrics-listen " + config.metrics_listen +
                                 " is not a loopback address (metrics-public = yes allows it)");
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
  check_metrics_listen(config_);
  const int listen_fd = listen_socket(config_);

  // A connection is handed to this loop once its first bytes came, or
  // after the handshake's time: strangers who connect and say nothing (or
  // connect and leave) wait in the kernel, not in the service's slots.
  const int defer = static_cast<int>(config_.handshake_timeout);
  if (::setsockopt(listen_fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) != 0)
    RPMEM_LOG_WARN("service: TCP_DEFER_ACCEPT: %s", std::strerror(errno));

  const int sfd = termination_signal_fd();
  if (sfd < 0) throw SetupError(errno, "signalfd failed");
  // SIGHUP through a descriptor (rereads tls-crl), blocked before any client
  // thread starts.
  const int hfd = blocked_signal_fd({SIGHUP});
  if (hfd < 0) throw SetupError(errno, "signalfd failed");
  Loop loop(*this, tls, listen_fd, sfd, hfd);
  systemd::notify("READY=1");
  loop.run();
  ::close(hfd);
  ::close(sfd);
  RPMEM_LOG_NOTICE("service: stopped");
  return 0;
}

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

  std::string path = config_.status_socket;
  if (!config_.status_socket_set)
    if (const char *dir = std::getenv("RUNTIME_DIRECTORY"); dir && *dir)
      path = std::string(dir).substr(0, std::string(dir).find(':')) + "/status.sock";
  if (!path.empty() || !config_.metrics_listen.empty())
    status_ = std::make_unique<StatusServer>(
        io_, path, config_.status_group, config_.metrics_listen, [this](StatusServer::What what) {
          const StatusSnapshot s = snapshot();
          return what == StatusServer::What::kText   ? render_text(s)
                 : what == StatusServer::What::kJson ? render_json(s)
                                                     : render_metrics(s);
        });
  watchdog_usec_ = systemd::watchdog_usec();
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
        systemd::notify("STOPPING=1");
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
      spare_.shed(acceptor_.native_handle());
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
    TlsControlStream control(c.stream.native_handle(), c.fd);
    proto::Hello hello;
    hello.transports = rpmem::transport::available_transports();
    if (control.write_all(proto::encode(hello))) return;
    PoolStore store(config_.poolset_dir + "/" + c.name);
    SessionParams params = session_params(config_);
    params.target.listen_address = c.local;
    params.target.peer_address = c.peer;
    params.client_lanes = c.client_lanes;
    params.max_client_lanes = config_.max_lanes_per_client;
    params.status = c.status;
    params.behind = behind_;
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

}  // namespace rpmemd
