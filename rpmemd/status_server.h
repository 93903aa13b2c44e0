// SPDX-License-Identifier: BSD-3-Clause
// The service's status channel, on its event loop: a Unix socket (mode
// 0660, in the group of status-group or the daemon's own) and, when the
// config asks, a TCP address for metrics only. A request is one line:
//   status          the text of `rpmemd status`
//   status json     the same as JSON
//   metrics         Prometheus' text format
// or an HTTP GET of /metrics (curl --unix-socket, a Prometheus scraper).
// The answer follows and the connection closes. Bounds: 8 connections at
// a time (past them a newcomer is closed), 4 KiB of request, 2 s to send
// it; anything else gets a line "error: ..." and the service goes on.
#ifndef RPMEMD_STATUS_SERVER_H
#define RPMEMD_STATUS_SERVER_H

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <string>

namespace rpmemd {

class StatusServer {
 public:
  enum class What { kText, kJson, kMetrics };
  using Answer = std::function<std::string(What)>;

  // Listens on the Unix socket `path` (unless empty; a stale socket file
  // there is replaced) and on `metrics_listen` (unless empty; "ADDRESS:PORT",
  // HTTP GET /metrics only). `group`: the socket file's group (empty: the
  // daemon's). Throws rpmem::SetupError when it cannot.
  StatusServer(boost::asio::io_context &io, const std::string &path, const std::string &group,
               const std::string &metrics_listen, Answer answer);
  ~StatusServer();  // removes the socket file
  StatusServer(const StatusServer &) = delete;
  StatusServer &operator=(const StatusServer &) = delete;

  void stop();  // closes the listeners and every connection

 private:
  struct Client;
  using Acceptor = boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol>;
  void listen_unix(const std::string &group);
  void listen_metrics(const std::string &metrics_listen);
  void accept_next(Acceptor &acceptor, bool metrics_only);
  void serve(const std::shared_ptr<Client> &c);
  void answer_line(const std::shared_ptr<Client> &c, std::string line);
  void reply(const std::shared_ptr<Client> &c, std::string text);

  boost::asio::io_context &io_;
  std::string path_;
  Answer answer_;
  Acceptor unix_;
  std::unique_ptr<Acceptor> tcp_;
  unsigned clients_ = 0;
  bool stopped_ = false;
  bool unix_bound_ = false;  // the socket file is ours to remove
};

// True when `listen` ("ADDRESS:PORT") is a loopback address.
bool is_loopback_listen(const std::string &listen);

// The client side, for `rpmemd status [--json|--metrics] [--socket PATH]`:
// sends `request` and writes the answer to stdout. Returns the exit code
// (1 with a message on stderr when the socket cannot be reached or the
// answer is an error).
int status_command(const std::string &path, const std::string &request);

}  // namespace rpmemd

#endif  // RPMEMD_STATUS_SERVER_H
