// SPDX-License-Identifier: BSD-3-Clause
// rpmemd's service mode: TLS listener, one thread and one Session per client.
#include "rpmemd/service.h"

#include "common/error.h"
#include "common/log.h"
#include "common/transport/transport.h"
#include "rpmemd/control_io.h"
#include "rpmemd/pool_store.h"
#include "rpmemd/session.h"
#include "rpmemd/tls_policy.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include <netdb.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
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

constexpr std::chrono::seconds kHandshakeTimeout{10};

void notify(const char *state) {
#ifdef RPMEM_HAVE_SYSTEMD
  sd_notify(0, state);
#else
  (void)state;
#endif
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

// A TLS stream as a session's control channel. Sessions end when the
// service shuts the socket down, so there is nothing to wake.
class TlsControlStream final : public ControlStream {
 public:
  explicit TlsControlStream(ssl::stream<tcp::socket> &s) : s_(s) {}
  std::error_code read_frame(proto::FrameHeader &hdr, proto::Bytes &payload, int &) override {
    return read_frame_with(
        [this](uint8_t *buf, size_t n) {
          boost::system::error_code ec;
          asio::read(s_, asio::buffer(buf, n), ec);
          return map(ec);
        },
        hdr, payload);
  }
  std::error_code write_all(const proto::Bytes &bytes) override {
    boost::system::error_code ec;
    asio::write(s_, asio::buffer(bytes), ec);
    return map(ec);
  }
  void add_wake_fd(int) override {}

 private:
  static std::error_code map(const boost::system::error_code &ec) {
    if (!ec) return {};
    // EOF, a TLS close, a reset or a shut-down socket: the client is gone.
    RPMEM_LOG_DEBUG("control connection: %s", ec.message().c_str());
    return errc(ECONNRESET);
  }
  ssl::stream<tcp::socket> &s_;
};

std::string numeric_address(const sockaddr_storage &ss, socklen_t len) {
  char host[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<const sockaddr *>(&ss), len, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0)
    return {};
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7);
  return h;
}

struct Client {
  std::thread thread;
  int fd = -1;
  std::atomic<bool> done{false};
};

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
  ssl::context &ctx = tls.context();
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

  const int sfd = termination_signal_fd();
  if (sfd < 0) throw SetupError(errno, "signalfd failed");
  const int hfd = hangup_signal_fd();
  if (hfd < 0) throw SetupError(errno, "signalfd failed");

  std::mutex mu;
  std::list<Client> clients;  // guarded by mu
  auto reap = [&](bool all) {
    std::lock_guard lock(mu);
    for (auto it = clients.begin(); it != clients.end();) {
      if (all) ::shutdown(it->fd, SHUT_RDWR);
      if (all || it->done.load()) {
        it->thread.join();
        ::close(it->fd);
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
  };

  notify("READY=1");
  unsigned next_id = 0;
  for (;;) {
    pollfd p[3] = {{listen_fd, POLLIN, 0}, {sfd, POLLIN, 0}, {hfd, POLLIN, 0}};
    if (::poll(p, 3, 1000) < 0 && errno != EINTR) break;
    if (p[2].revents & POLLIN) {
      signalfd_siginfo info;
      if (::read(hfd, &info, sizeof(info)) > 0) {
        std::string why;
        if (tls.reload_crl(why))
          RPMEM_LOG_NOTICE("service: SIGHUP: certificate revocation lists reread");
        else
          RPMEM_LOG_ERR("service: SIGHUP: %s; the previous lists stay in use", why.c_str());
      }
    }
    if (p[1].revents) {
      RPMEM_LOG_NOTICE("service: signal received, making open pools durable and exiting");
      notify("STOPPING=1");
      break;
    }
    reap(false);
    if (!(p[0].revents & POLLIN)) continue;
    sockaddr_storage peer{};
    socklen_t plen = sizeof(peer);
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr *>(&peer), &plen, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu);
    Client &c = clients.emplace_back();
    c.fd = fd;
    const unsigned id = ++next_id;
    const std::string peer_name = numeric_address(peer, plen);
    c.thread = std::thread([this, &ctx, &c, id, peer_name] {
      serve(ctx, c.fd, id, peer_name);
      ::shutdown(c.fd, SHUT_RDWR);  // the client sees the end now, not at the reap
      c.done = true;
    });
  }
  reap(true);
  ::close(hfd);
  ::close(sfd);
  ::close(listen_fd);
  RPMEM_LOG_NOTICE("service: stopped");
  return 0;
}

void Service::serve(ssl::context &ctx, int fd, unsigned id, const std::string &peer) {
  asio::io_context io;
  ssl::stream<tcp::socket> stream(io, ctx);
  sockaddr_storage local{};
  socklen_t llen = sizeof(local);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &llen);
  boost::system::error_code ec;
  int dup_fd = ::dup(fd);  // the socket object owns this one; `fd` stays for shutdown()
  stream.next_layer().assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), dup_fd, ec);
  if (ec) {
    ::close(dup_fd);
    return;
  }
  std::string refused;  // why the client's certificate was refused
  ServerTls::prepare_connection(stream.native_handle(), &refused);
  bool done = false;
  stream.async_handshake(ssl::stream_base::server, [&](const boost::system::error_code &e) {
    ec = e;
    done = true;
  });
  io.run_for(kHandshakeTimeout);
  if (!done) {
    stream.next_layer().close();
    io.restart();
    io.run();
    RPMEM_LOG_WARN("client %u (%s): TLS handshake timed out", id, peer.c_str());
    return;
  }
  if (ec) {
    RPMEM_LOG_WARN("client %u (%s): TLS handshake failed: %s", id, peer.c_str(),
                   refused.empty() ? ec.message().c_str() : refused.c_str());
    return;
  }
  X509 *cert = SSL_get0_peer_certificate(stream.native_handle());
  auto name = client_name_from_cert(cert);  // checked in the handshake already
  const std::string cn = name ? name.value() : std::string();
  TlsControlStream control(stream);
  proto::Hello hello;
  hello.transports = rpmem::transport::available_transports();
  const std::string dir = config_.poolset_dir + "/" + cn;
  struct stat st {};
  if (cn.empty() || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    RPMEM_LOG_WARN("client %u (%s): certificate '%s' has no pool set directory", id, peer.c_str(),
                   cn.c_str());
    hello.status = EACCES;
    control.write_all(proto::encode(hello));
    return;
  }
  RPMEM_LOG_NOTICE("client %u (%s): '%s' authenticated, pool set directory %s", id, peer.c_str(),
                   cn.c_str(), dir.c_str());
  if (control.write_all(proto::encode(hello))) return;

  PoolStore store(dir);
  SessionParams params;
  params.listen_address = numeric_address(local, llen);
  params.transports = hello.transports;
  params.persist_apm = config_.persist_apm;
  params.nthreads = config_.nthreads;
  Session session(store, control, params, -1);
  session.run();
  stream.shutdown(ec);
  RPMEM_LOG_INFO("client %u (%s): session ended", id, peer.c_str());
}

}  // namespace rpmemd
