// SPDX-License-Identifier: BSD-3-Clause
// A private OpenSSH sshd for the tests that go through real ssh: throw-away
// host and user keys in a test's directory, listening on the addresses
// given (in a network namespace when started through "ip netns exec"), and
// an ssh wrapper for RPMEM_SSH (one word: the wrapper adds -F).
#ifndef RPMEM_TESTS_INTEGRATION_PRIVATE_SSHD_H
#define RPMEM_TESTS_INTEGRATION_PRIVATE_SSHD_H

#include "tests/integration/harness.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace rpmem_test {

class PrivateSshd {
 public:
  PrivateSshd() = default;
  PrivateSshd(const PrivateSshd &) = delete;
  PrivateSshd &operator=(const PrivateSshd &) = delete;
  ~PrivateSshd() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Whether this machine can run one here: empty, or why not (a test skips).
  static std::string unavailable() {
    if (::access("/usr/sbin/sshd", X_OK) != 0 || ::access("/usr/bin/ssh", X_OK) != 0)
      return "OpenSSH server or client not installed";
    if (::geteuid() != 0) return "a private sshd needs root here";
    return {};
  }

  // Starts sshd on `port` of `addresses` (the first is where it is
  // reached), run through `prefix` (e.g. "ip netns exec NS "), with its
  // files in `dir`. False with `why` when it does not come up.
  bool start(const std::string &dir, const std::vector<std::string> &addresses, int port,
             const std::string &prefix, std::string &why) {
    dir_ = dir;
    port_ = port;
    ::mkdir("/run/sshd", 0755);  // sshd's privilege separation directory
    const std::string keys = "ssh-keygen -q -t ed25519 -N '' -f " + dir + "/hostkey && " +
                             "ssh-keygen -q -t ed25519 -N '' -f " + dir + "/id && cp " + dir +
                             "/id.pub " + dir + "/authorized_keys";
    if (std::system(keys.c_str()) != 0) {
      why = "ssh-keygen failed";
      return false;
    }
    std::ofstream conf(dir + "/sshd_config");
    conf << "Port " << port << "\n";
    for (const std::string &a : addresses) conf << "ListenAddress " << a << "\n";
    conf << "HostKey " << dir << "/hostkey\nPidFile " << dir << "/sshd.pid\n"
         << "AuthorizedKeysFile " << dir << "/authorized_keys\n"
         << "StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
         << "UsePAM no\nPermitRootLogin prohibit-password\nPrintMotd no\nLogLevel VERBOSE\n";
    conf.close();
    auto hostkey = read_file(dir + "/hostkey.pub");
    std::string key(hostkey.begin(), hostkey.end());
    key = key.substr(0, key.rfind(' '));  // "type base64", without the comment
    std::ofstream known(dir + "/known_hosts");
    for (const std::string &a : addresses) known << "[" << a << "]:" << port << " " << key << "\n";
    known.close();
    std::ofstream(dir + "/ssh_config") << "Host *\n  IdentityFile " << dir << "/id\n"
                                       << "  IdentitiesOnly yes\n  UserKnownHostsFile " << dir
                                       << "/known_hosts\n  StrictHostKeyChecking yes\n"
                                       << "  LogLevel ERROR\n";
    std::ofstream(dir + "/ssh") << "#!/bin/sh\nexec /usr/bin/ssh -F " << dir
                                << "/ssh_config \"$@\"\n";
    ::chmod((dir + "/ssh").c_str(), 0755);
    pid_ = ::fork();
    if (pid_ < 0) {
      why = "fork failed";
      return false;
    }
    if (pid_ == 0) {
      const std::string cmd = "exec " + prefix + "/usr/sbin/sshd -D -e -f " + dir +
                              "/sshd_config 2>" + dir + "/sshd.log";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !reachable(addresses.front()); ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!reachable(addresses.front())) {
      why = "sshd did not start:\n" + log();
      return false;
    }
    return true;
  }

  int port() const { return port_; }
  std::string ssh() const { return dir_ + "/ssh"; }  // for RPMEM_SSH
  std::string log() const {
    auto b = read_file(dir_ + "/sshd.log");
    return {b.begin(), b.end()};
  }
  // user@host:port for rpmem_create, as this process's user.
  std::string target(const std::string &host) const {
    passwd *pw = ::getpwuid(::geteuid());
    const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    return std::string(pw ? pw->pw_name : "root") + "@" + h + ":" + std::to_string(port_);
  }

 private:
  bool reachable(const std::string &address) const {
    const std::string cmd =
        "exec 3<>/dev/tcp/" + address + "/" + std::to_string(port_) + " 2>/dev/null";
    return std::system(("bash -c '" + cmd + "'").c_str()) == 0;
  }

  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_PRIVATE_SSHD_H
