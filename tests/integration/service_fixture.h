// SPDX-License-Identifier: BSD-3-Clause
// The fixture of the tests of rpmemd as a service: certificates of two CAs
// (the service and alice, bob, carol from the first, mallory from the
// other), a pool set for each client, rpmemd --service on a loopback port
// with mutual TLS and a stand-in for systemd's notification socket; the
// client presents alice's certificate unless a test says otherwise.
#ifndef RPMEM_TESTS_INTEGRATION_SERVICE_FIXTURE_H
#define RPMEM_TESTS_INTEGRATION_SERVICE_FIXTURE_H

#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {

using Clock = std::chrono::steady_clock;
inline constexpr size_t kPool = 4 * kMiB;

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl not installed";
    const std::string d = target_.dir();
    // Two CAs; the service and alice, bob, carol from the first, mallory from the other.
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string script = "set -e; cd " + d + "; exec 2>openssl.log\n";
    for (const char *ca : {"ca", "other-ca"})
      script += std::string("openssl req -x509") + key + " -keyout " + ca + ".key -out " + ca +
                ".crt -subj /CN=" + ca + " -days 2\n";
    auto issue = [&](const std::string &name, const std::string &ca, const std::string &ext) {
      script += "openssl req" + key + " -keyout " + name + ".key -out " + name +
                ".csr -subj /CN=" + (name == "server" ? std::string("localhost") : name) + "\n";
      script += "printf '" + ext + "\\n' > " + name + ".ext\n";
      script += "openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
                ".key -CAcreateserial -out " + name + ".crt -days 2 -extfile " + name + ".ext\n";
    };
    issue("server", "ca", "subjectAltName=IP:" + test_ip() + ",DNS:localhost");
    for (const char *c : {"alice", "bob", "carol"}) issue(c, "ca", "extendedKeyUsage=clientAuth");
    issue("mallory", "other-ca", "extendedKeyUsage=clientAuth");
    ASSERT_EQ(std::system(script.c_str()), 0) << "certificate generation failed";

    for (const char *c : {"alice", "bob", "mallory"}) {
      const std::string dir = target_.poolset_dir() + "/" + c;
      ::mkdir(dir.c_str(), 0755);
      target_.write_poolset(std::string(c) + "/p.set", {{kPool, std::string(c) + ".part"}},
                            "OPTION NOHDRS\n");
    }
    port_ = free_port();
    std::ofstream(d + "/service.conf") << "poolset-dir = " << target_.poolset_dir() << "\n"
                                       << "log-file = " << d << "/service.log\n"
                                       << "log-level = info\nservice = yes\n"
                                       << "service-listen = " << test_ip() << ":" << port_ << "\n"
                                       << "tls-ca = " << d << "/ca.crt\n"
                                       << "tls-cert = " << d << "/server.crt\n"
                                       << "tls-key = " << d << "/server.key\n"
                                       << extra_conf_;
    // A datagram socket standing in for systemd's notification socket.
    notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const std::string notify_path = d + "/notify";
    std::strncpy(un.sun_path, notify_path.c_str(), sizeof(un.sun_path) - 1);
    ASSERT_EQ(::bind(notify_fd_, reinterpret_cast<sockaddr *>(&un), sizeof(un)), 0);
    start_daemon();
    ASSERT_TRUE(can_connect(port_)) << "the service did not start:\n" << log();
    // The status socket comes after the service's port: ready once its
    // mode is set, which is its last step.
    if (!status_socket_.empty()) {
      struct stat st {};
      for (int i = 0; i < 500; ++i) {
        if (::stat(status_socket_.c_str(), &st) == 0 && (st.st_mode & 0777) == 0660) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    target_str_ = "rpmems://" + test_ip() + ":" + std::to_string(port_);
    as("alice");
  }

  // Starts rpmemd --service with the fixture's configuration and waits
  // (5 s at most) until it accepts connections.
  void start_daemon() {
    const std::string d = target_.dir();
    const std::string notify_path = d + "/notify";
    daemon_ = ::fork();
    ASSERT_GE(daemon_, 0);
    if (daemon_ == 0) {
      ::setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
      if (runtime_dir_.empty())
        ::unsetenv("RUNTIME_DIRECTORY");
      else
        ::setenv("RUNTIME_DIRECTORY", runtime_dir_.c_str(), 1);
      if (nofile_ > 0) {
        rlimit rl{nofile_, nofile_};
        ::setrlimit(RLIMIT_NOFILE, &rl);
      }
      ::execl(RPMEMD_PATH, RPMEMD_PATH, "-c", (d + "/service.conf").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !can_connect(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Ends the service with `sig` and waits for it; its exit status.
  int stop_daemon(int sig) {
    int status = -1;
    if (daemon_ > 0 && ::kill(daemon_, sig) == 0) ::waitpid(daemon_, &status, 0);
    daemon_ = -1;
    return status;
  }

  void TearDown() override {
    if (notify_fd_ >= 0) ::close(notify_fd_);
    if (daemon_ > 0) {
      ::kill(daemon_, SIGTERM);
      ::waitpid(daemon_, nullptr, 0);
    }
    for (const char *v : {"RPMEM_TLS_CA", "RPMEM_TLS_CERT", "RPMEM_TLS_KEY"}) ::unsetenv(v);
  }

  // The client presents `who`'s certificate (empty: none).
  void as(const std::string &who, const std::string &ca = "ca") {
    const std::string d = target_.dir();
    set_env("RPMEM_TLS_CA", d + "/" + ca + ".crt");
    if (who.empty()) {
      ::unsetenv("RPMEM_TLS_CERT");
      ::unsetenv("RPMEM_TLS_KEY");
    } else {
      set_env("RPMEM_TLS_CERT", d + "/" + who + ".crt");
      set_env("RPMEM_TLS_KEY", d + "/" + who + ".key");
    }
  }

  std::string log() const {
    auto b = read_file(target_.dir() + "/service.log");
    return {b.begin(), b.end()};
  }
  // Waits until the service log holds `what`.
  bool log_shows(const std::string &what) const {
    return file_shows(target_.dir() + "/service.log", what);
  }

  bool part_has_byte(uint8_t b) const {
    const auto part = read_file(target_.part_path("alice.part"));
    return std::find(part.begin(), part.end(), b) != part.end();
  }

  RPMEMpool *create(const char *set, LocalPool &local, unsigned &nlanes) {
    return rpmem_create(target_str_.c_str(), set, local.data(), local.size(), &nlanes, nullptr);
  }

  // With a session open, the service's STATUS= to systemd says so.
  void expect_status_of_one_session() {
    LocalPool local(kPool);
    unsigned nl = 1;
    RPMEMpool *rpp = create("p.set", local, nl);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
    std::string seen;
    for (int i = 0; i < 50 && seen.find("STATUS=1 session;") == std::string::npos; ++i) {
      pollfd p{notify_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) != 1) continue;
      char buf[512] = {};
      const ssize_t n = ::recv(notify_fd_, buf, sizeof(buf) - 1, 0);
      if (n > 0) seen += std::string(buf, static_cast<size_t>(n)) + "\n";
    }
    EXPECT_NE(seen.find("STATUS=1 session; handshakes 0/128; connections 1/1024"),
              std::string::npos)
        << seen;
    EXPECT_EQ(rpmem_close(rpp), 0);
  }

  Target target_;
  std::string extra_conf_;     // more lines for service.conf
  std::string runtime_dir_;    // the service's RUNTIME_DIRECTORY (systemd's); empty: none
  std::string status_socket_;  // SetUp waits for the service's status socket here
  rlim_t nofile_ = 0;          // the service's RLIMIT_NOFILE (soft and hard); 0: inherited
  int notify_fd_ = -1;
  pid_t daemon_ = -1;
  int port_ = 0;
  std::string target_str_;
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_SERVICE_FIXTURE_H
