// SPDX-License-Identifier: BSD-3-Clause
// The service's TLS policy against real openssl: TLS 1.2 only with ECDHE and
// AEAD suites, TLS 1.3, resumption attempts that get a full handshake, the
// client name rules (exactly one CN, at most 64 bytes, directory-name
// characters), and tls-crl revocation with a reload on SIGHUP. Also the
// client's side of the policy, against an openssl s_server.
#include "tests/integration/harness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kPool = 4 * kMiB;
const std::string kLongName(64, 'n');  // the longest name allowed

// A certificate made through the OpenSSL API, which (unlike `openssl req`)
// can carry a common name longer than X.509 allows: subject entries `cns`
// (UTF8String each), an EC key, signed by the CA in `dir`.
bool make_api_cert(const std::string &dir, const std::string &name,
                   const std::vector<std::string> &cns) {
  bool ok = false;
  FILE *f = std::fopen((dir + "/ca.key").c_str(), "r");
  EVP_PKEY *ca_key = f ? PEM_read_PrivateKey(f, nullptr, nullptr, nullptr) : nullptr;
  if (f) std::fclose(f);
  f = std::fopen((dir + "/ca.crt").c_str(), "r");
  X509 *ca = f ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
  if (f) std::fclose(f);
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *cert = X509_new();
  if (ca_key && ca && key && cert) {
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 4242 + static_cast<long>(cns.size()));
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_NAME *subject = X509_get_subject_name(cert);
    for (const auto &cn : cns)
      X509_NAME_add_entry_by_NID(subject, NID_commonName, V_ASN1_UTF8STRING,
                                 reinterpret_cast<const unsigned char *>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(ca));
    X509_set_pubkey(cert, key);
    ok = X509_sign(cert, ca_key, EVP_sha256()) > 0;
  }
  if (ok) {
    f = std::fopen((dir + "/" + name + ".crt").c_str(), "w");
    ok = f && PEM_write_X509(f, cert) == 1;
    if (f) std::fclose(f);
    f = std::fopen((dir + "/" + name + ".key").c_str(), "w");
    ok = ok && f && PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    if (f) std::fclose(f);
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  X509_free(ca);
  EVP_PKEY_free(ca_key);
  return ok;
}

class TlsPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl not installed";
    d_ = target_.dir();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string script = "set -e; cd " + d_ + "; exec 2>openssl.log\n";
    script += "openssl req -x509" + key + " -keyout ca.key -out ca.crt -subj /CN=ca -days 2\n";
    // A minimal CA database for `openssl ca -revoke` and `-gencrl`.
    script += "touch index.txt; echo 01 > crlnumber\n";
    script += "printf '[ca]\\ndefault_ca=d\\n[d]\\ndatabase=" + d_ +
              "/index.txt\\ncrlnumber=" + d_ +
              "/crlnumber\\ndefault_md=sha256\\ndefault_crl_days=2\\n' > ca.cnf\n";
    auto issue = [&](const std::string &name, const std::string &subj, const std::string &ext) {
      script += "openssl req -utf8" + key + " -keyout " + name + ".key -out " + name +
                ".csr -subj $'" + subj + "'\n";
      script += "printf '" + ext + "\\n' > " + name + ".ext\n";
      script += "openssl x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial " +
                "-out " + name + ".crt -days 2 -extfile " + name + ".ext\n";
    };
    issue("server", "/CN=localhost", "subjectAltName=IP:" + test_ip() + ",DNS:localhost");
    const std::string client_ext = "extendedKeyUsage=clientAuth";
    for (const char *c : {"alice", "bob", "carol"}) issue(c, std::string("/CN=") + c, client_ext);
    issue("long", "/CN=" + kLongName, client_ext);
    issue("twocn", "/CN=alice/CN=bob", client_ext);
    issue("nocn", "/O=alice", client_ext);
    issue("slash", "/CN=alice\\/..", client_ext);
    issue("dot", "/CN=.alice", client_ext);
    issue("dash", "/CN=-alice", client_ext);
    issue("space", "/CN=ali ce", client_ext);
    issue("newline", "/CN=alice\\nrpmemd[1]: <err> forged", client_ext);
    issue("utf8",
          "/CN=al\xc3\xaf"
          "ce",
          client_ext);
    // Bob is revoked from the start.
    script += "openssl ca -config ca.cnf -keyfile ca.key -cert ca.crt -revoke bob.crt\n";
    script += "openssl ca -config ca.cnf -keyfile ca.key -cert ca.crt -gencrl -out crl.pem\n";
    std::ofstream(d_ + "/make-certs.sh") << script;
    ASSERT_EQ(std::system(("bash " + d_ + "/make-certs.sh").c_str()), 0)
        << "certificate generation failed: " << text(d_ + "/openssl.log");
    ASSERT_TRUE(make_api_cert(d_, "toolong", {std::string(65, 'a')}));
    ASSERT_TRUE(make_api_cert(d_, "api-twocn", {"alice", "alice"}));

    for (const std::string &c : {std::string("alice"), std::string("bob"), std::string("carol"),
                                 kLongName, std::string(65, 'a'),
                                 std::string("al\xc3\xaf"
                                             "ce")}) {
      ::mkdir((target_.poolset_dir() + "/" + c).c_str(), 0755);
      target_.write_poolset(c + "/p.set", {{kPool, c.substr(0, 8) + ".part"}}, "OPTION NOHDRS\n");
    }
    port_ = free_port();
    std::ofstream(d_ + "/service.conf") << "poolset-dir = " << target_.poolset_dir() << "\n"
                                        << "log-file = " << d_ << "/service.log\n"
                                        << "log-level = info\nservice = yes\n"
                                        << "service-listen = " << test_ip() << ":" << port_ << "\n"
                                        << "tls-ca = " << d_ << "/ca.crt\n"
                                        << "tls-cert = " << d_ << "/server.crt\n"
                                        << "tls-key = " << d_ << "/server.key\n"
                                        << "tls-crl = " << d_ << "/crl.pem\n";
    daemon_ = ::fork();
    ASSERT_GE(daemon_, 0);
    if (daemon_ == 0) {
      ::execl(RPMEMD_PATH, RPMEMD_PATH, "-c", (d_ + "/service.conf").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !can_connect(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(can_connect(port_)) << "the service did not start:\n" << log();
    target_str_ = "rpmems://" + test_ip() + ":" + std::to_string(port_);
  }

  void TearDown() override {
    if (daemon_ > 0) {
      ::kill(daemon_, SIGTERM);
      ::waitpid(daemon_, nullptr, 0);
    }
    for (const char *v : {"RPMEM_TLS_CA", "RPMEM_TLS_CERT", "RPMEM_TLS_KEY", "RPMEM_TIMEOUT"})
      ::unsetenv(v);
  }

  static std::string text(const std::string &path) {
    auto b = read_file(path);
    return {b.begin(), b.end()};
  }
  std::string log() const { return text(d_ + "/service.log"); }

  // Creates and closes p.set as `who`; the errno, 0 on success.
  int create_as(const std::string &who) {
    set_env("RPMEM_TLS_CA", d_ + "/ca.crt");
    set_env("RPMEM_TLS_CERT", d_ + "/" + who + ".crt");
    set_env("RPMEM_TLS_KEY", d_ + "/" + who + ".key");
    LocalPool local(kPool);
    unsigned nl = 1;
    errno = 0;
    RPMEMpool *rpp = rpmem_create(target_str_.c_str(), "p.set", local.data(), kPool, &nl, nullptr);
    if (!rpp) return errno ? errno : -1;
    if (rpmem_close(rpp) != 0) return errno;
    return 0;
  }

  // Waits until the service log holds `what`.
  bool wait_log(const std::string &what) const { return file_shows(d_ + "/service.log", what); }

  // openssl s_client as alice with extra options; its output.
  std::string s_client(const std::string &options, int *status = nullptr) {
    return command_output("openssl s_client -connect " + test_ip() + ":" + std::to_string(port_) +
                              " -CAfile " + d_ + "/ca.crt -cert " + d_ + "/alice.crt -key " + d_ +
                              "/alice.key " + options + " </dev/null 2>&1",
                          status);
  }

  // Revokes `who` too, and replaces crl.pem (a rename: never half written).
  void revoke(const std::string &who) {
    const std::string cmd =
        "cd " + d_ + " && openssl ca -config ca.cnf -keyfile ca.key -cert ca.crt -revoke " + who +
        ".crt 2>>openssl.log && openssl ca -config ca.cnf -keyfile " +
        "ca.key -cert ca.crt -gencrl -out crl.new 2>>openssl.log && mv " + "crl.new crl.pem";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << text(d_ + "/openssl.log");
  }

  Target target_;
  std::string d_;
  pid_t daemon_ = -1;
  int port_ = 0;
  std::string target_str_;
};

TEST_F(TlsPolicy, Tls12CbcSuitesAreRefused) {
  for (const char *cipher :
       {"AES128-SHA", "ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384", "AES128-GCM-SHA256"}) {
    int status = 0;
    std::string out = s_client(std::string("-tls1_2 -cipher ") + cipher, &status);
    EXPECT_NE(status, 0) << cipher << ":\n" << out;
    EXPECT_THAT(out, Not(HasSubstr("Cipher is " + std::string(cipher)))) << out;
  }
}

TEST_F(TlsPolicy, Tls12EcdheAeadAndTls13AreAccepted) {
  for (const char *cipher : {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                             "ECDHE-ECDSA-CHACHA20-POLY1305"}) {
    int status = 0;
    std::string out = s_client(std::string("-tls1_2 -cipher ") + cipher, &status);
    EXPECT_EQ(status, 0) << cipher << ":\n" << out;
    EXPECT_THAT(out, HasSubstr("Cipher is " + std::string(cipher))) << out;
  }
  int status = 0;
  std::string out = s_client("-tls1_3", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("TLSv1.3")) << out;
}

TEST_F(TlsPolicy, OlderProtocolsAreRefused) {
  int status = 0;
  std::string out = s_client("-tls1_1 -cipher DEFAULT@SECLEVEL=0", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("Cipher is (NONE)")) << out;
}

TEST_F(TlsPolicy, ResumptionAttemptsGetFullHandshakesWithoutErrors) {
  for (const char *version : {"-tls1_2", "-tls1_3"}) {
    int status = 0;
    std::string out = s_client(std::string(version) + " -reconnect", &status);
    EXPECT_EQ(status, 0) << version << ":\n" << out;
    EXPECT_THAT(out, Not(HasSubstr("session id context uninitialized"))) << out;
    EXPECT_THAT(out, Not(HasSubstr("Reused,"))) << out;
    EXPECT_THAT(out, HasSubstr("New,")) << out;
  }
  EXPECT_THAT(log(), Not(HasSubstr("session id context"))) << log();
  EXPECT_EQ(create_as("alice"), 0) << rpmem_errormsg() << log();
}

TEST_F(TlsPolicy, LongestNameIsServed) {
  EXPECT_EQ(create_as("long"), 0) << rpmem_errormsg() << log();
  EXPECT_THAT(log(), HasSubstr("'" + kLongName + "' authenticated"));
}

TEST_F(TlsPolicy, CertificatesWithABadClientNameAreRefusedWithTheReason) {
  const std::pair<const char *, std::string> cases[] = {
      {"twocn", "2 common names (CN), exactly one allowed"},
      {"api-twocn", "2 common names (CN), exactly one allowed"},
      {"nocn", "no common name (CN)"},
      {"toolong", "common name (CN) is 65 bytes long, at most 64 allowed"},
      {"slash", "'alice/..' holds a character outside [A-Za-z0-9._-]"},
      {"dot", "'.alice' begins with '.'"},
      {"dash", "'-alice' begins with '-'"},
      {"space", "'ali ce' holds a character outside"},
      {"newline", "'alice\\nrpmemd[1]: <err> forged' holds a character outside"},
      {"utf8", "holds a character outside"},
  };
  for (const auto &[who, why] : cases) {
    EXPECT_EQ(create_as(who), ECONNRESET) << who << ": " << rpmem_errormsg();
    EXPECT_TRUE(wait_log(why)) << who << ": no log line saying \"" << why << "\":\n" << log();
  }
  EXPECT_THAT(log(), Not(HasSubstr("authenticated"))) << log();
  // The newline did not start a line of its own.
  EXPECT_THAT(log(), Not(HasSubstr("\nrpmemd[1]: <err> forged"))) << log();
  EXPECT_EQ(create_as("alice"), 0) << rpmem_errormsg() << log();
}

TEST_F(TlsPolicy, RevokedCertificateIsRefusedAndSighupRereadsTheCrl) {
  EXPECT_EQ(create_as("bob"), ECONNRESET) << rpmem_errormsg();
  EXPECT_TRUE(wait_log("certificate revoked")) << log();
  EXPECT_FALSE(file_exists(target_.part_path("bob.part")));
  EXPECT_EQ(create_as("carol"), 0) << rpmem_errormsg() << log();

  revoke("carol");
  ASSERT_EQ(::kill(daemon_, SIGHUP), 0);
  ASSERT_TRUE(wait_log("certificate revocation lists reread")) << log();
  EXPECT_EQ(create_as("carol"), ECONNRESET) << rpmem_errormsg() << log();
  EXPECT_TRUE(wait_log("CN=carol' (depth 0): certificate revoked")) << log();
  EXPECT_EQ(create_as("bob"), ECONNRESET);
  EXPECT_EQ(create_as("alice"), 0) << rpmem_errormsg() << log();

  // A broken file on the next SIGHUP: an error line, the lists in use stay.
  std::ofstream(d_ + "/crl.pem") << "not a CRL\n";
  ASSERT_EQ(::kill(daemon_, SIGHUP), 0);
  ASSERT_TRUE(wait_log("the previous lists stay in use")) << log();
  EXPECT_EQ(create_as("carol"), ECONNRESET);
  EXPECT_EQ(create_as("alice"), 0) << rpmem_errormsg() << log();
  EXPECT_GT(::kill(daemon_, 0), -1) << "the service died";
}

// The client's side: a server that offers only TLS 1.2 with CBC suites is
// refused in the handshake.
TEST_F(TlsPolicy, ClientRefusesAServerWithoutEcdheAead) {
  for (const char *cipher : {"ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384"}) {
    const int port = free_port();
    const std::string out_path = d_ + "/s_server.out";
    int in[2];  // s_server's stdin: open until it is killed (EOF would stop it)
    ASSERT_EQ(::pipe(in), 0);
    pid_t server = ::fork();
    ASSERT_GE(server, 0);
    if (server == 0) {
      ::dup2(in[0], 0);
      ::close(in[1]);
      int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      const std::string accept = test_ip() + ":" + std::to_string(port);
      ::execlp("openssl", "openssl", "s_server", "-accept", accept.c_str(), "-cert",
               (d_ + "/server.crt").c_str(), "-key", (d_ + "/server.key").c_str(), "-tls1_2",
               "-cipher", cipher, nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !can_connect(port); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    set_env("RPMEM_TLS_CA", d_ + "/ca.crt");
    set_env("RPMEM_TLS_CERT", d_ + "/alice.crt");
    set_env("RPMEM_TLS_KEY", d_ + "/alice.key");
    set_env("RPMEM_TIMEOUT", "1");
    LocalPool local(kPool);
    unsigned nl = 1;
    const std::string t = "rpmems://" + test_ip() + ":" + std::to_string(port);
    RPMEMpool *rpp = rpmem_create(t.c_str(), "p.set", local.data(), kPool, &nl, nullptr);
    EXPECT_EQ(rpp, nullptr);
    if (rpp) rpmem_close(rpp);
    EXPECT_THAT(std::string(rpmem_errormsg()),
                HasSubstr("TLS handshake with " + test_ip() + " failed"))
        << cipher;
    ::kill(server, SIGTERM);
    ::waitpid(server, nullptr, 0);
    ::close(in[0]);
    ::close(in[1]);
    EXPECT_THAT(text(out_path), Not(HasSubstr("CIPHER is"))) << text(out_path);
  }
}

}  // namespace
}  // namespace rpmem_test
