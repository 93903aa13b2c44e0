// SPDX-License-Identifier: BSD-3-Clause
// Service::Conn: one control connection of the service, as the event loop
// (service.cc, service_handshake.cc, service_status.cc) keeps it. Internal
// to the service. Thread-safety: the loop's own, but for the fields a
// session's thread uses once the loop handed the connection to it
// (in_session): stream, fd, the names, client_lanes and status.
#ifndef RPMEMD_SERVICE_CONN_H
#define RPMEMD_SERVICE_CONN_H

#include "rpmemd/admission.h"
#include "rpmemd/service.h"
#include "rpmemd/status.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <string>
#include <thread>

namespace rpmemd {

// One control connection: its TLS stream, the deadline of its handshake,
// and, once authenticated, the thread of its session.
struct Service::Conn {
  Conn(boost::asio::io_context &io, boost::asio::ssl::context &ctx)
      : stream(io, ctx), timer(io), record_timer(io) {}
  unsigned id = 0;
  std::string peer;   // numeric address
  std::string local;  // the address the client reached
  std::string name;   // the certificate's client name, once authenticated
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream;
  boost::asio::steady_timer timer;         // the handshake's deadline
  boost::asio::steady_timer record_timer;  // the next look for a whole first record
  int fd = -1;                             // the socket, for shutdown() from the loop
  std::thread thread;
  bool in_session = false;
  std::string refused;  // why the TLS policy refused the client's certificate
  // Lanes granted to all sessions of this certificate (max-lanes-per-client).
  Admission::LaneCounter client_lanes;
  std::shared_ptr<SessionStatus> status;  // once in a session
};

}  // namespace rpmemd

#endif  // RPMEMD_SERVICE_CONN_H
