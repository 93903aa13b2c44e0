// SPDX-License-Identifier: BSD-3-Clause
// A TCP connect that a dropped SYN does not hold up for a second.
//
// A listener whose accept queue is full drops a SYN without a word, and
// the kernel sends it again only after a second (then 3 s, then 7 s). A
// stranger who floods the service from the client's own address fills
// that queue now and then; one dropped SYN would then cost the client a
// second. So when a try has had no answer after `first_retry`, another
// socket tries beside it, then after twice that, and so on; the first to
// connect is kept and the others are closed.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_CONNECT_H
#define RPMEM_COMMON_TRANSPORT_TCP_CONNECT_H

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>

namespace rpmem::transport::tcp {

struct ConnectTries {
  std::chrono::milliseconds first_retry{200};
  unsigned max{5};       // sockets at most, each one a descriptor for a while
  unsigned started = 0;  // out: how many tries were made
  int winner = -1;       // out: which one connected (0: the first)
};

// Connects `out` to one of `endpoints` within `timeout`, running `io`
// (which must have no other work). Returns asio::error::timed_out when no
// try connected in time; any other failure of a try (a refusal, an
// unreachable network, no descriptor) ends every try and is returned.
boost::system::error_code connect_racing(
    boost::asio::io_context &io, boost::asio::ip::tcp::socket &out,
    const boost::asio::ip::tcp::resolver::results_type &endpoints,
    std::chrono::milliseconds timeout, ConnectTries &tries);
boost::system::error_code connect_racing(
    boost::asio::io_context &io, boost::asio::ip::tcp::socket &out,
    const boost::asio::ip::tcp::resolver::results_type &endpoints,
    std::chrono::milliseconds timeout);

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_CONNECT_H
