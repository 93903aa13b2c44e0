// SPDX-License-Identifier: BSD-3-Clause
// Service: rpmemd as a long-running daemon. It listens on a TCP port (or
// takes the socket from systemd), authenticates every client with mutual
// TLS (rpmemd/tls_policy.h), confines each to <poolset-dir>/<certificate
// CN>, serves each authenticated control connection as one Session on a
// thread of its own, reports readiness to systemd, rereads tls-crl on
// SIGHUP, and on SIGTERM/SIGINT makes every open pool durable, unlocks it
// and exits.
#ifndef RPMEMD_SERVICE_H
#define RPMEMD_SERVICE_H

#include "common/refusal_log.h"
#include "common/transport/tcp/spare_descriptor.h"
#include "rpmemd/admission.h"
#include "rpmemd/config.h"
#include "rpmemd/status.h"
#include "rpmemd/status_server.h"
#include "rpmemd/tls_policy.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rpmemd {

// Splits "ADDRESS:PORT" / "[V6]:PORT"; false when malformed.
bool split_listen(const std::string &listen, std::string &address, unsigned short &port);

class Service {
 public:
  explicit Service(Config config) : config_(std::move(config)) {}
  // Returns the exit code; throws rpmem::SetupError when it cannot start
  // (bad TLS files, cannot listen).
  int run();

 public:
  struct Conn;  // one control connection

 private:
  // The event loop on the main thread: accepts, admits (the caps), runs
  // every TLS handshake with a deadline, and starts a session's thread only
  // for an authenticated client. No stranger costs a thread.
  class Loop {
   public:
    Loop(Service &service, ServerTls &tls, int listen_fd, int signal_fd, int hangup_fd);
    void run();  // until a signal, then every session has ended

   private:
    void accept_next();
    void wait_signal();
    void wait_hangup();
    void stop();
    void admit(boost::asio::ip::tcp::socket socket);
    void await_first_record(const std::shared_ptr<Conn> &c);
    void handshaken(const std::shared_ptr<Conn> &c, const boost::system::error_code &ec);
    void refuse_session(const std::shared_ptr<Conn> &c);
    void session_done(const std::shared_ptr<Conn> &c);
    void forget(const std::shared_ptr<Conn> &c);
    void drop(Admission::Id id);                          // closes a handshake to make room
    void serve(const std::shared_ptr<Conn> &c) noexcept;  // a session's thread
    // Once a second: the sessions' rates, systemd's STATUS= and watchdog
    // (service_status.cc, with snapshot()).
    void tick();
    // What the status channel tells; without `detailed`, only the caps of
    // the connections and sessions and the refusals (for STATUS=).
    StatusSnapshot snapshot(bool detailed = true) const;

    Service &service_;
    const Config &config_;
    ServerTls &tls_;
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::posix::stream_descriptor signals_;
    boost::asio::posix::stream_descriptor hangups_;
    boost::asio::steady_timer backoff_;
    rpmem::transport::tcp::SpareDescriptor spare_;  // shed a connection when out of descriptors
    bool stopping_ = false;
    // The loop's own: its connections (handshakes and sessions), and the
    // caps' counts and decisions on them.
    std::vector<std::shared_ptr<Conn>> conns_;
    Admission admission_;
    rpmem::RefusalLog refusals_{"connection"};
    // What the status channel tells: since when, how many sessions, what
    // the ended ones did by client certificate.
    std::unique_ptr<StatusServer> status_;
    boost::asio::steady_timer tick_;
    int64_t started_ns_ = 0;
    uint64_t sessions_started_ = 0;
    std::map<std::string, rpmem::transport::LaneTotals> ended_;
    // Pools whose client could run ahead and whose session ended without
    // a close (StatusSnapshot::behind).
    std::shared_ptr<BehindPools> behind_ = std::make_shared<BehindPools>();
    std::string systemd_status_;  // the last STATUS= sent
    uint64_t watchdog_usec_ = 0;  // WatchdogSec= of the unit; 0: none
  };

  Config config_;
};

}  // namespace rpmemd

#endif  // RPMEMD_SERVICE_H
