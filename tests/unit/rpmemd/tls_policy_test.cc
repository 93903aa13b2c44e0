// SPDX-License-Identifier: BSD-3-Clause
// Tests of the client name rules (client_name_from_cert) on certificates
// built in memory: exactly one CN, 1 to 64 bytes of [A-Za-z0-9._-], not
// beginning with '.' or '-'.
#include "rpmemd/tls_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <openssl/x509.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

namespace rpmemd {
namespace {

using ::testing::HasSubstr;

struct X509Free {
  void operator()(X509 *x) const { X509_free(x); }
};
using Cert = std::unique_ptr<X509, X509Free>;

// A certificate whose subject is `cns` as CN attributes (UTF8String, no
// length limit), after an O attribute.
Cert cert_with(const std::vector<std::string> &cns) {
  Cert c(X509_new());
  X509_NAME *n = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char *>("org"),
                             -1, -1, 0);
  for (const auto &cn : cns)
    X509_NAME_add_entry_by_NID(n, NID_commonName, V_ASN1_UTF8STRING,
                               reinterpret_cast<const unsigned char *>(cn.data()),
                               static_cast<int>(cn.size()), -1, 0);
  return c;
}

void expect_refused(const std::vector<std::string> &cns, const std::string &why) {
  auto cert = cert_with(cns);
  auto r = client_name_from_cert(cert.get());
  ASSERT_FALSE(r.ok()) << (cns.empty() ? "(none)" : cns[0]) << " accepted";
  EXPECT_EQ(r.error().code, std::error_code(EACCES, std::generic_category()));
  EXPECT_THAT(r.error().message, HasSubstr(why));
}

TEST(ClientName, AcceptsOneCnOfDirectoryNameCharacters) {
  for (const std::string &name :
       std::vector<std::string>{"alice", "a", "node-01.example_com", "A.b-C_9", "x..y",
                                std::string(kMaxClientName, 'z')}) {
    auto cert = cert_with({name});
    auto r = client_name_from_cert(cert.get());
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().message;
    EXPECT_EQ(r.value(), name);
  }
}

TEST(ClientName, RefusesNoneOrSeveralCns) {
  expect_refused({}, "no common name (CN)");
  expect_refused({"alice", "bob"}, "2 common names (CN), exactly one allowed");
  expect_refused({"alice", "alice", "alice"}, "3 common names (CN)");
  auto r = client_name_from_cert(nullptr);
  EXPECT_FALSE(r.ok());
}

TEST(ClientName, RefusesMoreThan64BytesInsteadOfCuttingIt) {
  expect_refused({std::string(65, 'a')}, "65 bytes long, at most 64 allowed");
  expect_refused({std::string(300, 'a')}, "300 bytes long");
}

TEST(ClientName, RefusesCharactersADirectoryNameMustNotHave) {
  for (const std::string &name : std::vector<std::string>{
           "a/b", "..", ".", ".hidden", "-dash", "a b", "a\nb", std::string("a\0b", 3), "a\\b",
           "al\xc3\xaf"
           "ce",
           "a:b", "a*b", ""}) {
    auto cert = cert_with({name});
    auto r = client_name_from_cert(cert.get());
    EXPECT_FALSE(r.ok()) << name << " accepted";
  }
  expect_refused({".alice"}, "begins with '.'");
  expect_refused({"-alice"}, "begins with '-'");
  expect_refused({"a/.."}, "holds a character outside [A-Za-z0-9._-]");
  expect_refused({""}, "empty common name");
}

}  // namespace
}  // namespace rpmemd
