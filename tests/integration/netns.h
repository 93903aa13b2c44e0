// SPDX-License-Identifier: BSD-3-Clause
// A target behind a link the test can cut: a network namespace of its own,
// joined to this one by a veth pair, and a firewall in the namespace
// (iptables-legacy, which needs no module beyond ip_tables) that drops
// every packet while the link is "out". Nothing outside the namespace and
// the pair is touched. Needs root; tests skip without it.
#ifndef RPMEM_TESTS_INTEGRATION_NETNS_H
#define RPMEM_TESTS_INTEGRATION_NETNS_H

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace rpmem_test {

// `cmd` through sh, its output discarded; its exit status (-1: killed).
inline int sh(const std::string &cmd) {
  int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class NetNs {
 public:
  NetNs() {
    const int id = ::getpid() % 100000;
    ns_ = "rpmemt" + std::to_string(id);
    host_if_ = "rpmh" + std::to_string(id);
    ns_if_ = "rpmn" + std::to_string(id);
    // Tests run side by side: a /24 of their own, distinct for any two
    // processes whose ids are less than 12,500 apart.
    const std::string net =
        "10." + std::to_string(200 + id / 250 % 50) + "." + std::to_string(id % 250) + ".";
    host_ip_ = net + "1";
    ns_ip_ = net + "2";
  }
  ~NetNs() {
    if (link_made_) sh("ip link del " + host_if_);
    if (ns_made_) sh("ip netns del " + ns_);
  }
  NetNs(const NetNs &) = delete;
  NetNs &operator=(const NetNs &) = delete;

  // Sets it up; false with `why` when this machine does not let us.
  bool make(std::string &why) {
    if (sh("ip netns add " + ns_) != 0) return why = "network namespaces not permitted", false;
    ns_made_ = true;
    if (sh("ip link add " + host_if_ + " type veth peer name " + ns_if_) != 0)
      return why = "veth not permitted", false;
    link_made_ = true;
    bool ok = sh("ip link set " + ns_if_ + " netns " + ns_) == 0 &&
              sh("ip addr add " + host_ip_ + "/24 dev " + host_if_) == 0 &&
              sh("ip link set " + host_if_ + " up") == 0 &&
              sh(in_ns("ip addr add " + ns_ip_ + "/24 dev " + ns_if_)) == 0 &&
              sh(in_ns("ip link set " + ns_if_ + " up")) == 0 &&
              sh(in_ns("ip link set lo up")) == 0;
    if (!ok) return why = "cannot set up the veth pair in the namespace", false;
    if (!links_up()) return why = "veth link does not come up", false;
    return true;
  }
  // Waits (bounded) until both ends of the veth pair have carrier.
  bool links_up() const {
    for (int i = 0; i < 50; ++i) {
      if (sh("ip link show dev " + host_if_ + " | grep -q LOWER_UP") == 0 &&
          sh(in_ns("ip link show dev " + ns_if_) + " | grep -q LOWER_UP") == 0)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // The link drops every packet: both ways, or only what the target sends.
  // No error reaches either side: it is as if a switch went dark.
  bool cut(bool both_ways) const {
    const std::string fw = in_ns("iptables-legacy -w ");
    return sh(fw + "-I OUTPUT -o " + ns_if_ + " -j DROP") == 0 &&
           (!both_ways || sh(fw + "-I INPUT -i " + ns_if_ + " -j DROP") == 0);
  }
  // The target's host answers every tcp packet from the link with a reset:
  // each connection breaks at its next packet, and new ones are refused.
  bool reset() const {
    return sh(in_ns("iptables-legacy -w -I INPUT -i " + ns_if_ +
                    " -p tcp -j REJECT --reject-with tcp-reset")) == 0;
  }
  // The link drops each packet with probability `p`, both ways.
  bool lossy(double p) const {
    const std::string fw = in_ns("iptables-legacy -w ");
    const std::string rule =
        " -m statistic --mode random --probability " + std::to_string(p) + " -j DROP";
    return sh(fw + "-I OUTPUT -o " + ns_if_ + rule) == 0 &&
           sh(fw + "-I INPUT -i " + ns_if_ + rule) == 0;
  }
  bool heal() const {
    const std::string fw = in_ns("iptables-legacy -w ");
    return sh(fw + "-F OUTPUT") == 0 && sh(fw + "-F INPUT") == 0;
  }
  static bool have_firewall() { return sh("command -v iptables-legacy") == 0; }

  std::string in_ns(const std::string &cmd) const { return "ip netns exec " + ns_ + " " + cmd; }
  const std::string &name() const { return ns_; }
  const std::string &host_if() const { return host_if_; }
  const std::string &host_ip() const { return host_ip_; }
  const std::string &ns_ip() const { return ns_ip_; }

 private:
  std::string ns_, host_if_, ns_if_, host_ip_, ns_ip_;
  bool ns_made_ = false, link_made_ = false;
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_NETNS_H
