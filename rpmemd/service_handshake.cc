// SPDX-License-Identifier: BSD-3-Clause
// The service's admission and TLS handshakes, on the event loop: a new
// connection against the caps, the wait for its first TLS record, the
// handshake with its deadline, the client's certificate and pool set
// directory, then a session's thread -- or a refusal.
#include "common/log.h"
#include "common/proto.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tls_stream.h"
#include "common/transport/transport.h"
#include "rpmemd/service.h"
#include "rpmemd/service_conn.h"
#include "rpmemd/tls_policy.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>

namespace rpmemd {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace proto = rpmem::proto;
using asio::ip::tcp;

namespace {

// An address as text, an IPv4-mapped IPv6 one as IPv4 (as the data
// listener prints its peers).
std::string plain_address(const asio::ip::address &a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).to_string();
  return a.to_string();
}

}  // namespace

void Service::Loop::admit(tcp::socket socket) {
  boost::system::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  if (ec) return;  // gone already
  const std::string peer = plain_address(remote.address());
  // One that sent all it will send, and not a whole first record, can
  // never start a handshake: it goes now, before it costs a slot or a TLS
  // state (a crowd that connects, sends a byte and leaves is otherwise a
  // handshake's work for this loop each, and the listen queue overflows).
  const int fd = socket.native_handle();
  if (!rpmem::transport::tcp::tls_record_buffered(fd) && rpmem::transport::tcp::peer_hung_up(fd))
    return refusals_.refused(peer, "gone before its first TLS record");
  // A silent connection may have its first bytes waiting: this loop takes
  // new connections before it reads, so look.
  const Admission::Arrival arrival = admission_.on_connection(peer, [this](Admission::Id id) {
    auto it = std::find_if(conns_.begin(), conns_.end(),
                           [id](const std::shared_ptr<Conn> &c) { return c->id == id; });
    return it != conns_.end() && (*it)->stream.next_layer().is_open() &&
           rpmem::transport::tcp::tls_record_buffered((*it)->fd);
  });
  for (Admission::Id id : arrival.dropped) drop(id);
  if (arrival.refused) return refusals_.refused(peer, arrival.refused);
  std::shared_ptr<Conn> c;
  try {
    c = std::make_shared<Conn>(io_, tls_.context());
  } catch (const std::exception &) {
    // A literal: RefusalLog keeps the reason's address for later counts.
    return refusals_.refused(peer, "out of memory");
  }
  c->peer = peer;
  c->local = plain_address(socket.local_endpoint(ec).address());
  c->fd = socket.native_handle();
  rpmem::transport::tcp::set_nodelay(c->fd);
  rpmem::transport::tcp::set_peer_timeout(c->fd, config_.peer_timeout);
  c->stream.next_layer() = std::move(socket);
  ServerTls::prepare_connection(c->stream.native_handle(), &c->refused);
  c->id = admission_.on_handshake_start(peer);
  conns_.push_back(c);
  c->timer.expires_after(std::chrono::seconds(config_.handshake_timeout));
  c->timer.async_wait([this, c](const boost::system::error_code &e) {
    if (e || c->in_session) return;
    refusals_.refused(c->peer, "TLS handshake not done in time (handshake-timeout)");
    boost::system::error_code ignored;
    c->stream.next_layer().close(ignored);  // the handshake's handler ends it
  });
  await_first_record(c);
}

// The handshake starts once the client's first TLS record is here whole
// (its ClientHello, sent in one piece); until then the connection counts
// as silent, the first to go when room is needed, and costs no handshake.
// A part of a record is looked at again every 20 ms, within the deadline.
void Service::Loop::await_first_record(const std::shared_ptr<Conn> &c) {
  auto &sock = c->stream.next_layer();
  if (stopping_ || !sock.is_open()) return handshaken(c, asio::error::operation_aborted);
  if (rpmem::transport::tcp::tls_record_buffered(c->fd)) {
    admission_.on_first_bytes(c->id);
    c->stream.async_handshake(ssl::stream_base::server,
                              [this, c](const boost::system::error_code &e) { handshaken(c, e); });
    return;
  }
  char b;
  const ssize_t r = ::recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
    return handshaken(c, asio::error::eof);  // gone before it said anything
  if (r < 0) {                               // nothing yet: wake when something comes
    sock.async_wait(tcp::socket::wait_read, [this, c](const boost::system::error_code &e) {
      if (e) return handshaken(c, e);
      await_first_record(c);
    });
    return;
  }
  c->record_timer.expires_after(std::chrono::milliseconds(20));
  c->record_timer.async_wait([this, c](const boost::system::error_code &e) {
    if (e) return handshaken(c, e);
    await_first_record(c);
  });
}

void Service::Loop::drop(Admission::Id id) {
  auto it = std::find_if(conns_.begin(), conns_.end(),
                         [id](const std::shared_ptr<Conn> &c) { return c->id == id; });
  if (it == conns_.end()) return;
  Conn &c = **it;
  refusals_.refused(c.peer, "the oldest unauthenticated connection, dropped for a newer one");
  boost::system::error_code ignored;
  // Its handler forgets it, in this round of events: the socket's wait and
  // the timer between looks at a partial record both end now.
  c.stream.next_layer().close(ignored);
  c.record_timer.cancel();
}

void Service::Loop::forget(const std::shared_ptr<Conn> &c) {
  admission_.on_close(c->id);
  std::erase(conns_, c);
}

void Service::Loop::handshaken(const std::shared_ptr<Conn> &c,
                               const boost::system::error_code &ec) {
  admission_.on_handshake_end(c->id);
  c->timer.cancel();
  c->record_timer.cancel();
  // A handshake whose last read or write had completed before the loop
  // closed its socket (dropped for a newer connection, or timed out) still
  // ends in success; the descriptor may be another file's by now.
  if (ec || stopping_ || !c->stream.next_layer().is_open()) {
    if (ec && ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor) {
      RPMEM_LOG_WARN("client %u (%s): TLS handshake failed: %s", c->id, c->peer.c_str(),
                     c->refused.empty() ? ec.message().c_str() : c->refused.c_str());
      refusals_.count(c->refused.empty() ? "TLS handshake failed"
                                         : "TLS handshake failed: certificate refused");
    }
    return forget(c);
  }
  // The TLS policy checked the name in the handshake already.
  auto name = client_name_from_cert(SSL_get0_peer_certificate(c->stream.native_handle()));
  const std::string cn = name ? name.value() : std::string();
  const std::string dir = config_.poolset_dir + "/" + cn;
  struct stat st {};
  const bool has_dir = !cn.empty() && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  Admission::Verdict verdict = admission_.on_authenticated(c->id, cn, has_dir);
  if (verdict.refused) {
    RPMEM_LOG_WARN("client %u (%s): certificate '%s' %s", c->id, c->peer.c_str(), cn.c_str(),
                   verdict.refused);
    refusals_.count(verdict.refused);
    refuse_session(c);
    return;
  }
  c->name = cn;
  c->in_session = true;
  c->client_lanes = std::move(verdict.client_lanes);
  RPMEM_LOG_NOTICE("client %u (%s): '%s' authenticated, pool set directory %s", c->id,
                   c->peer.c_str(), cn.c_str(), dir.c_str());
  try {
    // Its lanes count what they serve only where someone can ask.
    if (status_)
      c->status = std::make_shared<SessionStatus>(c->id, cn, c->peer,
                                                  rpmem::transport::LaneCounters::now_ns());
    ++sessions_started_;
    c->thread = std::thread([this, c] {
      serve(c);
      ::shutdown(c->fd, SHUT_RDWR);  // the client sees the end now
      asio::post(io_, [this, c] { session_done(c); });
    });
  } catch (const std::exception &e) {
    RPMEM_LOG_ERR("client %u (%s): cannot start a session thread: %s", c->id, c->peer.c_str(),
                  e.what());
    admission_.on_session_end(c->id);
    refuse_session(c);
  }
}

// Tells an authenticated client why it is not served (EACCES in the hello),
// then closes.
void Service::Loop::refuse_session(const std::shared_ptr<Conn> &c) {
  auto hello = std::make_shared<proto::Bytes>();
  proto::Hello h;
  h.status = EACCES;
  *hello = proto::encode(h);
  c->in_session = false;
  c->timer.expires_after(std::chrono::seconds(2));
  c->timer.async_wait([c](const boost::system::error_code &e) {
    boost::system::error_code ignored;
    if (!e) c->stream.next_layer().close(ignored);
  });
  asio::async_write(c->stream, asio::buffer(*hello),
                    [this, c, hello](const boost::system::error_code &, size_t) {
                      c->timer.cancel();
                      forget(c);
                    });
}

}  // namespace rpmemd
