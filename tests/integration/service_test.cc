// SPDX-License-Identifier: BSD-3-Clause
// rpmemd as a service: mutual TLS on a loopback port, several clients and
// pools at once, refusals (no certificate, another CA, a name outside the
// client's directory), remove, and SIGTERM during traffic.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPool = 4 * kMiB;

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
    issue("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost");
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
                                       << "service-listen = 127.0.0.1:" << port_ << "\n"
                                       << "tls-ca = " << d << "/ca.crt\n"
                                       << "tls-cert = " << d << "/server.crt\n"
                                       << "tls-key = " << d << "/server.key\n";
    // A datagram socket standing in for systemd's notification socket.
    notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const std::string notify_path = d + "/notify";
    std::strncpy(un.sun_path, notify_path.c_str(), sizeof(un.sun_path) - 1);
    ASSERT_EQ(::bind(notify_fd_, reinterpret_cast<sockaddr *>(&un), sizeof(un)), 0);
    daemon_ = ::fork();
    ASSERT_GE(daemon_, 0);
    if (daemon_ == 0) {
      ::setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
      ::execl(RPMEMD_PATH, RPMEMD_PATH, "-c", (d + "/service.conf").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !can_connect(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(can_connect(port_)) << "the service did not start:\n" << log();
    target_str_ = "rpmems://127.0.0.1:" + std::to_string(port_);
    as("alice");
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

  RPMEMpool *create(const char *set, LocalPool &local, unsigned &nlanes) {
    return rpmem_create(target_str_.c_str(), set, local.data(), local.size(), &nlanes, nullptr);
  }

  Target target_;
  int notify_fd_ = -1;
  pid_t daemon_ = -1;
  int port_ = 0;
  std::string target_str_;
};

TEST_F(Service, ServesSeveralClientsAndPoolsAtOnce) {
  // Alice: three pools from three threads; bob: a pool from another process.
  for (int i = 0; i < 3; ++i)
    target_.write_poolset("alice/t" + std::to_string(i) + ".set",
                          {{2 * kMiB, "alice-t" + std::to_string(i) + ".part"}}, "OPTION NOHDRS\n");
  pid_t bob = ::fork();
  ASSERT_GE(bob, 0);
  if (bob == 0) {
    as("bob");
    LocalPool local(kPool, 42);
    unsigned nl = 2;
    RPMEMpool *rpp = create("p.set", local, nl);
    int rc = !rpp || rpmem_persist(rpp, 0, kPool, 1, 0) || rpmem_close(rpp);
    ::_exit(rc);
  }
  std::atomic<int> failures{0};
  std::vector<std::unique_ptr<LocalPool>> locals;
  for (int i = 0; i < 3; ++i)
    locals.push_back(std::make_unique<LocalPool>(2 * kMiB, static_cast<uint8_t>(i + 7)));
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      unsigned nl = 2;
      const std::string set = "t" + std::to_string(i) + ".set";
      RPMEMpool *rpp = create(set.c_str(), *locals[i], nl);
      if (!rpp) {
        ++failures;
        return;
      }
      for (size_t off = 0; off < 2 * kMiB; off += 65536)
        if (rpmem_persist(rpp, off, 65536, static_cast<unsigned>(off / 65536) % nl, 0)) ++failures;
      if (rpmem_close(rpp)) ++failures;
    });
  }
  for (auto &t : threads) t.join();
  int status = 0;
  ASSERT_EQ(::waitpid(bob, &status, 0), bob);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log();
  EXPECT_EQ(failures.load(), 0) << log();
  for (int i = 0; i < 3; ++i) {
    auto r = target_.remote_pool({{2 * kMiB, "alice-t" + std::to_string(i) + ".part"}}, false);
    EXPECT_TRUE(same_bytes(r.data(), locals[i]->data(), 0, 2 * kMiB)) << i;
  }
  LocalPool bobs(kPool, 42);
  auto r = target_.remote_pool({{kPool, "bob.part"}}, false);
  EXPECT_TRUE(same_bytes(r.data(), bobs.data(), 0, kPool));
  EXPECT_NE(log().find("'bob' authenticated"), std::string::npos) << log();
}

TEST_F(Service, ClientWithoutCertificateIsRefused) {
  as("");
  LocalPool local(kPool);
  unsigned nl = 1;
  errno = 0;
  EXPECT_EQ(create("p.set", local, nl), nullptr);
  EXPECT_EQ(errno, ECONNRESET) << rpmem_errormsg();
  EXPECT_NE(std::string(rpmem_errormsg()).find("out-of-band connection failed"), std::string::npos)
      << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.part_path("alice.part")));
  EXPECT_NE(log().find("TLS handshake failed"), std::string::npos) << log();
}

TEST_F(Service, ClientCertificateFromAnotherCaIsRefused) {
  as("mallory");
  LocalPool local(kPool);
  unsigned nl = 1;
  errno = 0;
  EXPECT_EQ(create("p.set", local, nl), nullptr);
  EXPECT_EQ(errno, ECONNRESET) << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.part_path("mallory.part")));
  EXPECT_NE(log().find("TLS handshake failed"), std::string::npos) << log();
}

TEST_F(Service, ServiceCertificateFromAnotherCaIsRefusedByTheClient) {
  as("alice", "other-ca");
  LocalPool local(kPool);
  unsigned nl = 1;
  errno = 0;
  EXPECT_EQ(create("p.set", local, nl), nullptr);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_NE(std::string(rpmem_errormsg()).find("certificate verify failed"), std::string::npos)
      << rpmem_errormsg();
}

TEST_F(Service, ClientWithoutAPoolSetDirectoryIsEacces) {
  as("carol");
  LocalPool local(kPool);
  unsigned nl = 1;
  errno = 0;
  EXPECT_EQ(create("p.set", local, nl), nullptr);
  EXPECT_EQ(errno, EACCES) << rpmem_errormsg();
}

TEST_F(Service, PoolSetOutsideTheClientsDirectoryIsRefused) {
  LocalPool local(kPool);
  unsigned nl = 1;
  errno = 0;
  EXPECT_EQ(create("../bob/p.set", local, nl), nullptr);
  EXPECT_EQ(errno, EINVAL) << rpmem_errormsg();
  EXPECT_STREQ(rpmem_errormsg(), "Invalid pool descriptor");
  errno = 0;
  EXPECT_EQ(create((target_.poolset_dir() + "/bob/p.set").c_str(), local, nl), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(file_exists(target_.part_path("bob.part")));
  // Alice's own pool works, and is hers.
  RPMEMpool *rpp = create("p.set", local, nl);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << log();
  EXPECT_EQ(rpmem_close(rpp), 0);
  EXPECT_TRUE(file_exists(target_.part_path("alice.part")));
}

TEST_F(Service, RemoveGoesThroughTheService) {
  LocalPool local(kPool);
  unsigned nl = 1;
  RPMEMpool *rpp = create("p.set", local, nl);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  ASSERT_EQ(rpmem_close(rpp), 0);
  ASSERT_TRUE(file_exists(target_.part_path("alice.part")));
  ASSERT_EQ(rpmem_remove(target_str_.c_str(), "p.set", RPMEM_REMOVE_POOL_SET), 0)
      << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.part_path("alice.part")));
  EXPECT_FALSE(file_exists(target_.poolset_dir() + "/alice/p.set"));
  EXPECT_EQ(rpmem_remove(target_str_.c_str(), "p.set", 0), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(Service, SigtermDuringTrafficLosesNoAcknowledgedByte) {
  LocalPool local(kPool);
  unsigned nl = 2;
  RPMEMpool *rpp = create("p.set", local, nl);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  ASSERT_EQ(nl, 2u);
  std::atomic<uint64_t> acked[2] = {0, 0};
  std::vector<std::thread> threads;
  for (unsigned lane = 0; lane < 2; ++lane) {
    threads.emplace_back([&, lane] {
      for (uint64_t v = 1;; ++v) {
        std::memcpy(local.data() + lane * kMiB, &v, 8);
        if (rpmem_persist(rpp, lane * kMiB, (v % 3) ? 8 : 128 * 1024, lane, 0)) return;
        acked[lane] = v;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(::kill(daemon_, SIGTERM), 0);
  auto start = Clock::now();
  for (auto &t : threads) t.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  int status = 0;
  ASSERT_EQ(::waitpid(daemon_, &status, 0), daemon_);
  daemon_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_NE(log().find("making open pools durable"), std::string::npos) << log();
  rpmem_close(rpp);
  auto r = target_.remote_pool({{kPool, "alice.part"}}, false);
  for (unsigned lane = 0; lane < 2; ++lane) {
    uint64_t v;
    std::memcpy(&v, r.data() + lane * kMiB, 8);
    EXPECT_GT(acked[lane].load(), 0u);
    EXPECT_GE(v, acked[lane].load()) << "lane " << lane << " lost an acknowledged value";
  }
}

TEST_F(Service, ReportsReadinessToSystemd) {
  char buf[256] = {};
  pollfd p{notify_fd_, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "no notification from the service";
  ssize_t n = ::recv(notify_fd_, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(buf).find("READY=1"), std::string::npos) << buf;
}

TEST_F(Service, TakesTheListeningSocketFromSystemdSocketActivation) {
  const char *activate = "/usr/bin/systemd-socket-activate";
  if (::access(activate, X_OK) != 0) GTEST_SKIP() << "systemd-socket-activate not installed";
  const std::string d = target_.dir();
  const int port = free_port();
  // The config names another port: the passed socket must win.
  std::ifstream in(d + "/service.conf");
  std::string conf((std::istreambuf_iterator<char>(in)), {});
  conf += "service-listen = 127.0.0.1:1\nlog-file = " + d + "/activated.log\n";
  std::ofstream(d + "/activated.conf") << conf;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string listen = "127.0.0.1:" + std::to_string(port);
    ::execl(activate, activate, "-l", listen.c_str(), RPMEMD_PATH, "-c",
            (d + "/activated.conf").c_str(), nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 500 && !can_connect(port); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  LocalPool local(kPool);
  unsigned nl = 1;
  const std::string t = "rpmems://127.0.0.1:" + std::to_string(port);
  RPMEMpool *rpp = rpmem_create(t.c_str(), "p.set", local.data(), kPool, &nl, nullptr);
  EXPECT_NE(rpp, nullptr) << rpmem_errormsg();
  if (rpp) {
    EXPECT_EQ(rpmem_persist(rpp, 0, kPool, 0, 0), 0);
    EXPECT_EQ(rpmem_close(rpp), 0);
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto b = read_file(d + "/activated.log");
  std::string alog(b.begin(), b.end());
  EXPECT_NE(alog.find("listening on the socket systemd passed"), std::string::npos) << alog;
  auto r = target_.remote_pool({{kPool, "alice.part"}}, false);
  EXPECT_TRUE(same_bytes(r.data(), local.data(), 0, kPool));
}

}  // namespace
}  // namespace rpmem_test
