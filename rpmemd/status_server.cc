// SPDX-License-Identifier: BSD-3-Clause
// StatusServer: the status channel's Unix socket and metrics listener, on the event loop.
#include "rpmemd/status_server.h"

#include "common/error.h"
#include "common/log.h"
#include "common/refusal_log.h"
#include "rpmemd/service.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rpmemd {

namespace asio = boost::asio;
using generic = asio::generic::stream_protocol;
using rpmem::SetupError;

namespace {

constexpr unsigned kMaxClients = 8;
constexpr size_t kMaxRequest = 4096;
constexpr auto kRequestTime = std::chrono::seconds(2);

// A request line as the log and an error may show it: printable, short.
std::string shown(const std::string &line) {
  std::string o;
  for (char c : line.substr(0, 64)) o += (c >= 0x20 && c < 0x7f) ? c : '?';
  return o;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

std::string http(const char *status, const std::string &type, const std::string &body) {
  return std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

// Is `a` a loopback address (127.0.0.0/8, ::1)?
bool loopback(const std::string &a) {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(a, ec);
  return !ec && addr.is_loopback();
}

}  // namespace

struct StatusServer::Client {
  explicit Client(asio::io_context &io) : socket(io), timer(io) {}
  generic::socket socket;
  asio::steady_timer timer;
  std::string in;
  bool metrics_only = false;
};

StatusServer::StatusServer(asio::io_context &io, const std::string &path, const std::string &group,
                           const std::string &metrics_listen, Answer answer)
    : io_(io), path_(path), answer_(std::move(answer)), unix_(io) {
  if (!path.empty()) listen_unix(group);
  if (!metrics_listen.empty()) listen_metrics(metrics_listen);
}

void StatusServer::listen_unix(const std::string &group) {
  const std::string &path = path_;
  if (path.size() >= sizeof(sockaddr_un::sun_path))
    throw SetupError(ENAMETOOLONG, "status-socket '" + path + "': name too long");
  gid_t gid = static_cast<gid_t>(-1);
  if (!group.empty()) {
    const struct group *g = ::getgrnam(group.c_str());
    if (!g) throw SetupError(EINVAL, "status-group '" + group + "': no such group");
    gid = g->gr_gid;
  }
  // A socket file left by a daemon that is gone is replaced; one that
  // answers belongs to a daemon that is running.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      throw SetupError(EEXIST, "status-socket '" + path + "' exists and is not a socket");
    asio::local::stream_protocol::socket probe(io_);
    boost::system::error_code ec;
    probe.connect(asio::local::stream_protocol::endpoint(path), ec);
    if (!ec) throw SetupError(EADDRINUSE, "status-socket '" + path + "': another rpmemd answers");
    ::unlink(path.c_str());
  }
  boost::system::error_code ec;
  const generic::endpoint ep{asio::local::stream_protocol::endpoint(path)};
  // Created with no access for others, before its mode is set.
  const mode_t old = ::umask(0177);
  unix_.open(ep.protocol(), ec);
  if (!ec) unix_.bind(ep, ec);
  ::umask(old);
  if (!ec) unix_.listen(16, ec);
  if (ec) throw SetupError(ec.value(), "status-socket '" + path + "': " + ec.message());
  unix_bound_ = true;
  if (gid != static_cast<gid_t>(-1) && ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0)
    throw SetupError(errno, "status-socket '" + path + "': chown to group '" + group +
                                "': " + std::strerror(errno));
  if (::chmod(path.c_str(), 0660) != 0)
    throw SetupError(errno, "status-socket '" + path + "': chmod: " + std::strerror(errno));
  RPMEM_LOG_NOTICE("service: status on %s", path.c_str());
  accept_next(unix_, false);
}

void StatusServer::listen_metrics(const std::string &metrics_listen) {
  boost::system::error_code ec;
  {
    std::string address;
    unsigned short port = 0;
    if (!split_listen(metrics_listen, address, port))
      throw SetupError(EINVAL, "invalid metrics-listen '" + metrics_listen + "'");
    const auto addr = asio::ip::make_address(address, ec);
    if (ec) throw SetupError(EINVAL, "invalid metrics-listen address '" + address + "'");
    const generic::endpoint tep{asio::ip::tcp::endpoint(addr, port)};
    tcp_ = std::make_unique<Acceptor>(io_);
    tcp_->open(tep.protocol(), ec);
    if (!ec) tcp_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) tcp_->bind(tep, ec);
    if (!ec) tcp_->listen(16, ec);
    if (ec)
      throw SetupError(ec.value(),
                       "cannot listen on metrics-listen " + metrics_listen + ": " + ec.message());
    RPMEM_LOG_NOTICE("service: metrics on http://%s/metrics%s", metrics_listen.c_str(),
                     loopback(address) ? "" : " (not loopback: metrics-public = yes)");
    accept_next(*tcp_, true);
  }
}

bool is_loopback_listen(const std::string &listen) {
  std::string address;
  unsigned short port = 0;
  return split_listen(listen, address, port) && loopback(address);
}

StatusServer::~StatusServer() {
  stop();
  if (!path_.empty() && unix_bound_) ::unlink(path_.c_str());
}

void StatusServer::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  unix_.close(ignored);
  if (tcp_) tcp_->close(ignored);
}

void StatusServer::accept_next(Acceptor &acceptor, bool metrics_only) {
  if (stopped_) return;
  acceptor.async_accept([this, &acceptor, metrics_only](const boost::system::error_code &ec,
                                                        generic::socket socket) {
    if (stopped_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, most likely: the listener stays, a little later.
      RPMEM_LOG_WARN("service: status connection not accepted: %s", ec.message().c_str());
      auto wait = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(100));
      wait->async_wait([this, &acceptor, metrics_only, wait](const boost::system::error_code &) {
        accept_next(acceptor, metrics_only);
      });
      return;
    }
    if (clients_ >= kMaxClients) {
      RPMEM_LOG_WARN("service: status connection refused: %u are being answered", clients_);
      boost::system::error_code ignored;
      socket.close(ignored);
    } else {
      try {
        auto c = std::make_shared<Client>(io_);
        c->socket = std::move(socket);
        c->metrics_only = metrics_only;
        ++clients_;
        serve(c);
      } catch (const std::exception &e) {
        RPMEM_LOG_WARN("service: status connection dropped: %s", e.what());
      }
    }
    accept_next(acceptor, metrics_only);
  });
}

void StatusServer::serve(const std::shared_ptr<Client> &c) {
  c->timer.expires_after(kRequestTime);
  c->timer.async_wait([c](const boost::system::error_code &e) {
    boost::system::error_code ignored;
    if (!e) c->socket.close(ignored);  // the read ends with an error
  });
  asio::async_read_until(
      c->socket, asio::dynamic_buffer(c->in, kMaxRequest), '\n',
      [this, c](const boost::system::error_code &ec, size_t n) {
        if (ec == asio::error::not_found) return reply(c, "error: request too long\n");
        if (ec && !(ec == asio::error::eof && !c->in.empty())) {
          --clients_;
          c->timer.cancel();
          return;
        }
        std::string line = ec ? c->in : c->in.substr(0, n);
        if (line.rfind("GET ", 0) == 0 && c->in.find("\r\n\r\n") == std::string::npos && !ec) {
          // An HTTP request: the rest of its headers first.
          asio::async_read_until(c->socket, asio::dynamic_buffer(c->in, kMaxRequest), "\r\n\r\n",
                                 [this, c, line](const boost::system::error_code &e, size_t) {
                                   if (e == asio::error::not_found)
                                     return reply(c, http("431 Request Header Fields Too Large",
                                                          "text/plain", "too long\n"));
                                   if (e && e != asio::error::eof) {
                                     --clients_;
                                     c->timer.cancel();
                                     return;
                                   }
                                   answer_line(c, line);
                                 });
          return;
        }
        answer_line(c, std::move(line));
      });
}

void StatusServer::answer_line(const std::shared_ptr<Client> &c, std::string line) {
  line = trimmed(std::move(line));
  std::string out;
  try {
    if (line.rfind("GET ", 0) == 0) {
      const std::string target = line.substr(4, line.find(' ', 4) - 4);
      out = target == "/metrics" ? http("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                                        answer_(What::kMetrics))
                                 : http("404 Not Found", "text/plain", "only /metrics is here\n");
    } else if (c->metrics_only) {
      out = http("400 Bad Request", "text/plain", "GET /metrics only\n");
    } else if (line == "status") {
      out = answer_(What::kText);
    } else if (line == "status json") {
      out = answer_(What::kJson);
    } else if (line == "metrics") {
      out = answer_(What::kMetrics);
    } else {
      RPMEM_LOG_INFO("service: status request refused: '%s'", shown(line).c_str());
      out = "error: unknown request '" + shown(line) + "' (status, status json, metrics)\n";
    }
  } catch (const std::exception &e) {
    out = std::string("error: ") + e.what() + "\n";
  }
  reply(c, std::move(out));
}

void StatusServer::reply(const std::shared_ptr<Client> &c, std::string text) {
  auto body = std::make_shared<std::string>(std::move(text));
  asio::async_write(c->socket, asio::buffer(*body),
                    [this, c, body](const boost::system::error_code &, size_t) {
                      boost::system::error_code ignored;
                      c->socket.shutdown(generic::socket::shutdown_send, ignored);
                      c->socket.close(ignored);
                      c->timer.cancel();
                      --clients_;
                    });
}

int status_command(const std::string &path, const std::string &request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof(a.sun_path)) {
    std::fprintf(stderr, "rpmemd status: %s: %s\n", path.c_str(),
                 fd < 0 ? std::strerror(errno) : "name too long");
    if (fd >= 0) ::close(fd);
    return 1;
  }
  std::memcpy(a.sun_path, path.c_str(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
    std::fprintf(stderr, "rpmemd status: cannot connect to %s: %s\n", path.c_str(),
                 std::strerror(errno));
    ::close(fd);
    return 1;
  }
  const std::string line = request + "\n";
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    std::fprintf(stderr, "rpmemd status: %s: %s\n", path.c_str(), std::strerror(errno));
    ::close(fd);
    return 1;
  }
  std::string answer;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (answer.empty() || answer.rfind("error:", 0) == 0) {
    std::fprintf(stderr, "rpmemd status: %s", answer.empty() ? "no answer\n" : answer.c_str());
    return 1;
  }
  std::fwrite(answer.data(), 1, answer.size(), stdout);
  return 0;
}

}  // namespace rpmemd
