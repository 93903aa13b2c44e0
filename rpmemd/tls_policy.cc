// SPDX-License-Identifier: BSD-3-Clause
// The service's TLS context, client name check and revocation lists.
#include "rpmemd/tls_policy.h"

#include "common/log.h"
#include "common/tls_policy.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <cerrno>

namespace rpmemd {

namespace ssl = boost::asio::ssl;
using rpmem::errc;
using rpmem::Error;
using rpmem::SetupError;

namespace {

// SSL ex_data slots: the connection's "why refused" string, and the context's
// ServerTls.
int why_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}
int server_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (!e) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

std::string subject_of(X509 *cert) {
  if (!cert) return "?";
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

// Refuses the handshake for anything the chain check or the name check
// finds, and records why for the log line.
int verify_callback(int ok, X509_STORE_CTX *store) {
  auto *ssl =
      static_cast<SSL *>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto *why = ssl ? static_cast<std::string *>(SSL_get_ex_data(ssl, why_index())) : nullptr;
  X509 *cert = X509_STORE_CTX_get_current_cert(store);
  const int depth = X509_STORE_CTX_get_error_depth(store);
  if (!ok) {
    if (why && why->empty())
      *why = "certificate '" + subject_of(cert) + "' (depth " + std::to_string(depth) +
             "): " + X509_verify_cert_error_string(X509_STORE_CTX_get_error(store));
    return 0;
  }
  if (depth == 0) {
    auto name = client_name_from_cert(cert);
    if (!name) {
      if (why && why->empty())
        *why = "certificate '" + subject_of(cert) + "': " + name.error().message;
      X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
      return 0;
    }
  }
  return 1;
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

rpmem::Result<std::string> client_name_from_cert(X509 *cert) {
  if (!cert) return Error{errc(EACCES), "no certificate"};
  X509_NAME *subject = X509_get_subject_name(cert);
  int count = 0, at = -1;
  for (int i = -1; (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0;) {
    ++count;
    at = i;
  }
  if (count == 0) return Error{errc(EACCES), "no common name (CN)"};
  if (count > 1)
    return Error{errc(EACCES), std::to_string(count) + " common names (CN), exactly one allowed"};
  const ASN1_STRING *data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
  unsigned char *utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, data);
  if (len < 0) return Error{errc(EACCES), "common name (CN) is not a valid string"};
  std::string name(reinterpret_cast<const char *>(utf8), static_cast<size_t>(len));
  OPENSSL_free(utf8);
  if (name.empty()) return Error{errc(EACCES), "empty common name (CN)"};
  if (name.size() > kMaxClientName)
    return Error{errc(EACCES), "common name (CN) is " + std::to_string(name.size()) +
                                   " bytes long, at most " + std::to_string(kMaxClientName) +
                                   " allowed"};
  for (char c : name) {
    if (!name_char(c))
      return Error{errc(EACCES),
                   "common name (CN) '" + name + "' holds a character outside [A-Za-z0-9._-]"};
  }
  if (name.front() == '.' || name.front() == '-')
    return Error{errc(EACCES), "common name (CN) '" + name + "' begins with '" +
                                   std::string(1, name.front()) + "'"};
  return name;
}

ServerTls::ServerTls(const Config &config) : config_(config), ctx_(ssl::context::tls_server) {
  if (config_.tls_ca.empty() || config_.tls_cert.empty() || config_.tls_key.empty())
    throw SetupError(EINVAL, "service mode needs tls-ca, tls-cert and tls-key");
  SSL_CTX *ctx = ctx_.native_handle();
  if (const char *failed = rpmem::apply_tls_policy(ctx))
    throw SetupError(EINVAL, std::string("TLS setup failed: ") + failed + ": " + openssl_error());
  boost::system::error_code ec;
  ctx_.use_certificate_chain_file(config_.tls_cert, ec);
  if (ec)
    throw SetupError(EINVAL,
                     "TLS setup failed: tls-cert '" + config_.tls_cert + "': " + ec.message());
  ctx_.use_private_key_file(config_.tls_key, ssl::context::pem, ec);
  if (ec)
    throw SetupError(EINVAL,
                     "TLS setup failed: tls-key '" + config_.tls_key + "': " + ec.message());
  std::string why;
  store_ = make_store(why);
  if (!store_) throw SetupError(EINVAL, "TLS setup failed: " + why);
  // The context's own store is what a connection verifies against until
  // prepare_connection() gives it the current one.
  X509_STORE_up_ref(store_);
  SSL_CTX_set_cert_store(ctx, store_);
  SSL_CTX_set_ex_data(ctx, server_index(), this);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_callback);
  if (!config_.tls_crl.empty())
    RPMEM_LOG_NOTICE("service: certificate revocation lists from %s", config_.tls_crl.c_str());
}

ServerTls::~ServerTls() {
  std::lock_guard lock(mu_);
  X509_STORE_free(store_);
}

X509_STORE *ServerTls::make_store(std::string &why) const {
  X509_STORE *store = X509_STORE_new();
  if (!store) {
    why = "out of memory";
    return nullptr;
  }
  if (X509_STORE_load_file(store, config_.tls_ca.c_str()) != 1) {
    why = "tls-ca '" + config_.tls_ca + "': " + openssl_error();
    X509_STORE_free(store);
    return nullptr;
  }
  if (config_.tls_crl.empty()) return store;
  BIO *bio = BIO_new_file(config_.tls_crl.c_str(), "r");
  STACK_OF(X509_INFO) *infos =
      bio ? PEM_X509_INFO_read_bio(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  int crls = 0;
  bool failed = !infos;
  for (int i = 0; infos && i < sk_X509_INFO_num(infos); ++i) {
    X509_INFO *info = sk_X509_INFO_value(infos, i);
    if (!info->crl) continue;
    if (X509_STORE_add_crl(store, info->crl) != 1) failed = true;
    ++crls;
  }
  sk_X509_INFO_pop_free(infos, X509_INFO_free);
  if (failed || crls == 0) {
    why = "tls-crl '" + config_.tls_crl + "': " + (failed ? openssl_error() : "no CRL in the file");
    X509_STORE_free(store);
    return nullptr;
  }
  // The client's own certificate is checked against its CA's CRL; a CA with
  // no CRL in the file refuses its clients (X509_V_ERR_UNABLE_TO_GET_CRL).
  X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
  return store;
}

bool ServerTls::reload_crl(std::string &why) {
  if (config_.tls_crl.empty()) return true;
  X509_STORE *fresh = make_store(why);
  if (!fresh) return false;
  std::lock_guard lock(mu_);
  X509_STORE_free(store_);
  store_ = fresh;
  return true;
}

void ServerTls::prepare_connection(SSL *ssl, std::string *why) {
  SSL_set_ex_data(ssl, why_index(), why);
  auto *self = static_cast<ServerTls *>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), server_index()));
  if (!self) return;
  std::lock_guard lock(self->mu_);
  SSL_set1_verify_cert_store(ssl, self->store_);
}

}  // namespace rpmemd
