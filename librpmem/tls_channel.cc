// SPDX-License-Identifier: BSD-3-Clause
// The TLS control channel to an rpmemd service.
#include "librpmem/tls_channel.h"

#include "common/log.h"
#include "common/text.h"
#include "common/tls_policy.h"
#include "common/transport/tcp/connect.h"
#include "common/transport/tcp/tls_stream.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

namespace rpmem {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;

struct TlsChannel::Impl {
  asio::io_context io;
  ssl::context ctx{ssl::context::tls_client};
  std::unique_ptr<ssl::stream<tcp::socket>> stream;  // made once ctx is set up
  bool open = true;

  // Runs one asynchronous operation to completion or until the timeout;
  // a timed-out operation is cancelled by closing the socket.
  template <typename Start>
  boost::system::error_code run(Start &&start, std::chrono::milliseconds timeout) {
    boost::system::error_code result = asio::error::would_block;
    start([&](const boost::system::error_code &ec, auto &&...) { result = ec; });
    io.restart();
    io.run_for(timeout);
    if (result == asio::error::would_block) {
      boost::system::error_code ignored;
      stream->next_layer().close(ignored);
      io.restart();
      io.run();
      open = false;
      return asio::error::timed_out;
    }
    return result;
  }
};

namespace {

std::error_code map(const boost::system::error_code &ec) {
  if (!ec) return {};
  if (ec == asio::error::timed_out) return errc(ETIMEDOUT);
  return errc(ECONNRESET);
}

}  // namespace

Result<std::shared_ptr<SSL_CTX>> lane_tls_context(const Settings &settings) {
  auto failed = [](const std::string &what) {
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : nullptr;
    ERR_clear_error();
    return Error{errc(EINVAL), "TLS data lanes: " + what + (r ? std::string(": ") + r : "")};
  };
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return failed("SSL_CTX_new");
  SSL_CTX *c = ctx.get();
  if (const char *what = apply_tls_policy(c)) return failed(what);
  if (SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_ciphersuites(c, transport::tcp::kLaneCipherSuites) != 1)
    return failed("TLS 1.3 policy");
  if (SSL_CTX_load_verify_locations(c, settings.tls_ca.c_str(), nullptr) != 1)
    return failed("RPMEM_TLS_CA '" + settings.tls_ca + "'");
  if (!settings.tls_cert.empty() &&
      (SSL_CTX_use_certificate_chain_file(c, settings.tls_cert.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(c, settings.tls_key.c_str(), SSL_FILETYPE_PEM) != 1))
    return failed("client certificate or key");
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  return ctx;
}

TlsChannel::TlsChannel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TlsChannel::~TlsChannel() { close(std::chrono::milliseconds(1000)); }

Result<std::unique_ptr<TlsChannel>> TlsChannel::connect(const TargetAddress &target,
                                                        const Settings &settings,
                                                        std::chrono::milliseconds wait) {
  uint16_t port = kServicePort;
  if (!target.port.empty()) {
    auto p = port_number(target.port);
    if (!p) return p.error();
    port = *p;
  }
  if (settings.tls_ca.empty())
    return Error{errc(EINVAL),
                 "RPMEM_TLS_CA must name the CA of the service for rpmems:// targets"};
  if (settings.tls_cert.empty() != settings.tls_key.empty())
    return Error{errc(EINVAL), "RPMEM_TLS_CERT and RPMEM_TLS_KEY go together"};

  auto impl = std::make_unique<Impl>();
  boost::system::error_code ec;
  impl->ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  if (const char *failed = apply_tls_policy(impl->ctx.native_handle()))
    return Error{errc(EINVAL), std::string("TLS setup failed: ") + failed};
  impl->ctx.load_verify_file(settings.tls_ca, ec);
  if (ec) return Error{errc(EINVAL), "RPMEM_TLS_CA '" + settings.tls_ca + "': " + ec.message()};
  if (!settings.tls_cert.empty()) {
    impl->ctx.use_certificate_chain_file(settings.tls_cert, ec);
    if (!ec) impl->ctx.use_private_key_file(settings.tls_key, ssl::context::pem, ec);
    if (ec) return Error{errc(EINVAL), "client certificate or key: " + ec.message()};
  }
  impl->stream = std::make_unique<ssl::stream<tcp::socket>>(impl->io, impl->ctx);
  auto &stream = *impl->stream;
  stream.set_verify_mode(ssl::verify_peer);
  stream.set_verify_callback(ssl::host_name_verification(target.host));
  SSL_set_tlsext_host_name(stream.native_handle(), target.host.c_str());

  const auto timeout = wait.count() > 0 ? wait : settings.control_timeout();
  tcp::resolver resolver(impl->io);
  auto endpoints =
      resolver.resolve(target.host, std::to_string(port), tcp::resolver::numeric_service, ec);
  if (ec) return Error{errc(EHOSTUNREACH), "cannot resolve '" + target.host + "': " + ec.message()};
  ec = transport::tcp::connect_racing(impl->io, stream.next_layer(), endpoints, timeout);
  if (ec) {
    int err = ec == asio::error::connection_refused ? ECONNREFUSED : map(ec).value();
    const std::string why = err == ETIMEDOUT
                                ? no_answer_text(std::chrono::ceil<std::chrono::seconds>(timeout))
                                : ec.message();
    return Error{errc(err),
                 "cannot connect to " + target.host + ":" + std::to_string(port) + ": " + why};
  }
  ec = impl->run([&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); },
                 timeout);
  if (ec) {
    std::string why = ec.message();
    if (ec.category() == asio::error::get_ssl_category()) {
      char buf[256];
      ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof(buf));
      why = buf;
    }
    return Error{map(ec), "TLS handshake with " + target.host + " failed: " + why};
  }
  tcp::no_delay nodelay(true);
  stream.next_layer().set_option(nodelay, ec);
  return std::unique_ptr<TlsChannel>(new TlsChannel(std::move(impl)));
}

bool TlsChannel::export_keying_material(uint8_t *out, size_t len, const char *label,
                                        const uint8_t *context, size_t context_len) noexcept {
  if (!impl_->open || !impl_->stream) return false;
  return transport::tcp::export_keying_material(impl_->stream->native_handle(), out, len, label,
                                                context, context_len);
}

std::error_code TlsChannel::send(const proto::Bytes &frame,
                                 std::chrono::milliseconds timeout) noexcept try {
  if (!impl_->open) return errc(ECONNRESET);
  return map(impl_->run(
      [&](auto handler) { asio::async_write(*impl_->stream, asio::buffer(frame), handler); },
      timeout));
} catch (...) {
  return errc(ENOMEM);
}

std::error_code TlsChannel::recv(proto::MsgType expected, proto::Bytes &payload,
                                 std::chrono::milliseconds timeout) noexcept try {
  if (!impl_->open) return errc(ECONNRESET);
  uint8_t hdr[proto::kFrameHeaderSize];
  auto ec = impl_->run(
      [&](auto handler) { asio::async_read(*impl_->stream, asio::buffer(hdr), handler); }, timeout);
  if (ec) return map(ec);
  auto h = proto::decode_frame_header(hdr);
  if (!h || h->type != expected) return errc(EPROTO);
  payload.resize(h->size);
  return map(impl_->run(
      [&](auto handler) { asio::async_read(*impl_->stream, asio::buffer(payload), handler); },
      timeout));
} catch (...) {
  return errc(ENOMEM);
}

int TlsChannel::hangup_fd() const noexcept {
  if (!impl_ || !impl_->open || !impl_->stream) return -1;
  return impl_->stream->next_layer().native_handle();
}

void TlsChannel::close(std::chrono::milliseconds timeout) noexcept {
  if (!impl_ || !impl_->open) return;
  try {
    impl_->run([&](auto handler) { impl_->stream->async_shutdown(handler); }, timeout);
    boost::system::error_code ignored;
    impl_->stream->next_layer().close(ignored);
  } catch (...) {
  }
  impl_->open = false;
}

}  // namespace rpmem
