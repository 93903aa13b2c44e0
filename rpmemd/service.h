// SPDX-License-Identifier: BSD-3-Clause
// Service: rpmemd as a long-running daemon. It listens on a TCP port (or
// takes the socket from systemd), authenticates every client with mutual
// TLS (rpmemd/tls_policy.h), confines each to <poolset-dir>/<certificate
// CN>, serves each control connection as one Session on a thread of its
// own, reports readiness to systemd, rereads tls-crl on SIGHUP, and on SIGTERM/SIGINT makes every
// open pool durable, unlocks it and exits.
#ifndef RPMEMD_SERVICE_H
#define RPMEMD_SERVICE_H

#include "rpmemd/config.h"

#include <boost/asio/ssl/context.hpp>

#include <string>

namespace rpmemd {

// Splits "ADDRESS:PORT" / "[V6]:PORT"; false when malformed.
bool split_listen(const std::string &listen, std::string &address, unsigned short &port);

class Service {
 public:
  explicit Service(Config config) : config_(std::move(config)) {}
  // Returns the exit code; throws rpmem::SetupError when it cannot start
  // (bad TLS files, cannot listen).
  int run();

 private:
  // One client connection: TLS handshake, identity, then one Session.
  void serve(boost::asio::ssl::context &ctx, int fd, unsigned id, const std::string &peer);

  Config config_;
};

}  // namespace rpmemd

#endif  // RPMEMD_SERVICE_H
