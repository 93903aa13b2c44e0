// SPDX-License-Identifier: BSD-3-Clause
// The service's TLS context: the protocol and cipher policy of
// common/tls_policy.h, mutual authentication against tls-ca, the client
// name check, and certificate revocation lists (tls-crl) that can be
// reread while the service runs.
//
// Thread-safety: prepare_connection(), client_name() and reload_crl() may be
// called from any thread at any time; a handshake in progress keeps the
// lists it started with.
#ifndef RPMEMD_TLS_POLICY_H
#define RPMEMD_TLS_POLICY_H

#include "common/error.h"
#include "rpmemd/config.h"

#include <boost/asio/ssl/context.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <mutex>
#include <string>

namespace rpmemd {

// The longest client name: X.509's upper bound for a common name.
inline constexpr size_t kMaxClientName = 64;

// The client name a certificate carries: its subject has exactly one CN
// attribute, of 1 to 64 bytes from [A-Za-z0-9._-], not beginning with '.'
// or '-' (so it names a directory below the pool set directory, and no
// other). EACCES with the reason otherwise.
rpmem::Result<std::string> client_name_from_cert(X509 *cert);

class ServerTls {
 public:
  // Loads tls-cert, tls-key, tls-ca and tls-crl (if set); throws
  // rpmem::SetupError naming the file that is wrong.
  explicit ServerTls(const Config &config);
  ~ServerTls();
  ServerTls(const ServerTls &) = delete;
  ServerTls &operator=(const ServerTls &) = delete;

  boost::asio::ssl::context &context() { return ctx_; }

  // Rereads tls-crl (SIGHUP). On an error the lists in use stay and the
  // message says why. Nothing to do (true) without tls-crl.
  bool reload_crl(std::string &why);

  // Requires: `ssl` was made from context(); `why` outlives its handshake.
  // Gives the connection the current CA and revocation lists, and `why`
  // receives the reason if the client's certificate is refused.
  static void prepare_connection(SSL *ssl, std::string *why);

 private:
  // A verification store: the CA, and the CRLs when tls-crl is set.
  X509_STORE *make_store(std::string &why) const;

  Config config_;
  boost::asio::ssl::context ctx_;
  std::mutex mu_;
  X509_STORE *store_ = nullptr;  // guarded by mu_; one reference owned
};

}  // namespace rpmemd

#endif  // RPMEMD_TLS_POLICY_H
