// SPDX-License-Identifier: BSD-3-Clause
// connect_racing: a TCP connect that a dropped SYN does not hold up for a second.
#include "common/transport/tcp/connect.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <vector>

namespace rpmem::transport::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

struct Race {
  Race(asio::io_context &context, const tcp::resolver::results_type &to, ConnectTries &t)
      : io(context), endpoints(to), tries(t), timer(context), wait(t.first_retry) {}

  asio::io_context &io;
  const tcp::resolver::results_type &endpoints;
  ConnectTries &tries;
  asio::steady_timer timer;
  std::chrono::milliseconds wait;
  std::vector<std::unique_ptr<tcp::socket>> sockets;
  bool over = false;
  boost::system::error_code result = asio::error::timed_out;

  void start() {
    const size_t i = sockets.size();
    sockets.push_back(std::make_unique<tcp::socket>(io));
    ++tries.started;
    asio::async_connect(*sockets[i], endpoints,
                        [this, i](const boost::system::error_code &ec, const tcp::endpoint &) {
                          if (over) return;
                          if (!ec) tries.winner = static_cast<int>(i);
                          end(ec);
                        });
    if (sockets.size() >= tries.max) return;
    timer.expires_after(wait);
    wait *= 2;
    timer.async_wait([this](const boost::system::error_code &ec) {
      if (!ec && !over) start();
    });
  }

  // Ends the race: every socket but the winner's is closed, so that their
  // handlers run now and the io_context runs out of work.
  void end(const boost::system::error_code &ec) {
    over = true;
    result = ec;
    timer.cancel();
    for (size_t j = 0; j < sockets.size(); ++j) {
      boost::system::error_code ignored;
      if (static_cast<int>(j) != tries.winner) sockets[j]->close(ignored);
    }
  }
};

}  // namespace

boost::system::error_code connect_racing(asio::io_context &io, tcp::socket &out,
                                         const tcp::resolver::results_type &endpoints,
                                         std::chrono::milliseconds timeout, ConnectTries &tries) {
  tries.started = 0;
  tries.winner = -1;
  if (tries.max == 0) tries.max = 1;
  Race race(io, endpoints, tries);
  io.restart();
  race.start();
  io.run_for(timeout);
  if (!race.over) race.end(asio::error::timed_out);
  io.restart();
  io.run();  // the closed tries' handlers
  if (race.result == asio::error::operation_aborted) {
    // Asio reports a socket it could not open (EMFILE) as a cancelled
    // connect: say why.
    tcp::socket probe(io);
    boost::system::error_code oerr;
    probe.open(endpoints.begin()->endpoint().protocol(), oerr);
    if (oerr) return oerr;
  }
  if (race.result) return race.result;
  out = std::move(*race.sockets[static_cast<size_t>(tries.winner)]);
  return {};
}

boost::system::error_code connect_racing(asio::io_context &io, tcp::socket &out,
                                         const tcp::resolver::results_type &endpoints,
                                         std::chrono::milliseconds timeout) {
  ConnectTries tries;
  return connect_racing(io, out, endpoints, timeout, tries);
}

}  // namespace rpmem::transport::tcp
