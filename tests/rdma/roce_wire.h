// SPDX-License-Identifier: BSD-3-Clause
// A wire of soft-RoCE between two addresses of the project's VM, and a cut
// of it: for the tests of verbs lanes across a network that fails
// (tests/rdma/verbs_loop_test.cc, and the run-ahead tests over verbs in
// tests/integration). RPMEM_WIRE_PAIR names tests/rdma/wire-pair.sh.
#ifndef RPMEM_TESTS_RDMA_ROCE_WIRE_H
#define RPMEM_TESTS_RDMA_ROCE_WIRE_H

#include <cstdlib>
#include <string>

namespace rpmem_test {

// Two soft-RoCE devices joined by a veth wire (wire-pair.sh): between
// them verbs traffic crosses the IP stack, where iptables can cut it, as
// between two machines (on one device rxe loops it back inside). Set up
// once and left up: removing an rxe device waits for every process that
// has it open.
struct WirePair {
  static constexpr const char *kClient = "10.1.0.1";
  static constexpr const char *kTarget = "10.1.0.2";
  static bool up() { return std::system(RPMEM_WIRE_PAIR " up") == 0; }
};

// RoCE's packets (UDP 4791: the lanes' and rdma_cm's own) dropped as they
// come in, as a network that loses them would: both ways, or only those
// coming in on `dev` (WirePair's rpmwB: the client's to the target; rpmwA:
// the target's to the client), from construction until heal() or the end
// of the scope.
class RoceCut {
 public:
  explicit RoceCut(std::string dev = {}) : match_(dev.empty() ? "" : "-i " + dev + " ") {
    on_ = run("-I");
  }
  ~RoceCut() { heal(); }
  RoceCut(const RoceCut &) = delete;
  RoceCut &operator=(const RoceCut &) = delete;
  bool on() const { return on_; }
  void heal() {
    if (on_) run("-D");
    on_ = false;
  }

 private:
  bool run(const char *op) const {
    const std::string cmd =
        std::string("iptables -w ") + op + " INPUT " + match_ + "-p udp --dport 4791 -j DROP";
    return std::system(cmd.c_str()) == 0;
  }
  std::string match_;
  bool on_ = false;
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_RDMA_ROCE_WIRE_H
