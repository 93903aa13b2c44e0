// SPDX-License-Identifier: BSD-3-Clause
// Tests of SpareDescriptor: shed() takes the queued connection off a
// listener and closes it, and holds a spare again.
#include "common/transport/tcp/spare_descriptor.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <gtest/gtest.h>

#include <poll.h>

namespace rpmem::transport::tcp {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

TEST(SpareDescriptor, ShedClosesTheQueuedConnectionAndKeepsASpare) {
  SpareDescriptor spare;
  ASSERT_TRUE(spare.held());
  asio::io_context io;
  tcp::acceptor listener(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket client(io);
  client.connect(listener.local_endpoint());  // queued: nobody accepts it

  spare.shed(listener.native_handle());

  // The listener's end is closed: the client reads the end of the stream.
  char b;
  boost::system::error_code ec;
  EXPECT_EQ(asio::read(client, asio::buffer(&b, 1), ec), 0u);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  EXPECT_TRUE(spare.held());
  // Nothing is queued any more.
  pollfd p{listener.native_handle(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
}

}  // namespace
}  // namespace rpmem::transport::tcp
