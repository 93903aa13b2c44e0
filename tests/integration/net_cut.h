// SPDX-License-Identifier: BSD-3-Clause
// A target behind a link the test cuts, served over ssh: rpmemd runs in a
// network namespace of its own (netns.h), its data lanes cross the veth
// link, and the stand-in ssh's pipes are the control channel (they do not
// cross the link). Skips where this machine allows no namespace.
#ifndef RPMEM_TESTS_INTEGRATION_NET_CUT_H
#define RPMEM_TESTS_INTEGRATION_NET_CUT_H

#include "tests/integration/harness.h"
#include "tests/integration/netns.h"

#include <gtest/gtest.h>

#include <signal.h>

#include <string>

namespace rpmem_test {

class NetCut : public ::testing::Test {
 protected:
  Target target_;
  NetNs net_;
  std::string ns_, host_if_, ns_ip_;

  void SetUp() override {
    std::string why;
    if (!net_.make(why)) GTEST_SKIP() << why;
    ns_ = net_.name();
    host_if_ = net_.host_if();
    ns_ip_ = net_.ns_ip();
    set_env("RPMEM_CMD", net_.in_ns("sh -c '" + target_.rpmemd_cmd() + "'"));
    set_env("FAKE_SSH_CONNECTION", net_.host_ip() + " 50000 " + ns_ip_ + " 22");
  }
  bool links_up() { return net_.links_up(); }
  void TearDown() override {
    net_.heal();
    if (pid_t pid = target_.rpmemd_pid(); pid > 0) ::kill(pid, SIGKILL);
    ::unsetenv("FAKE_SSH_CONNECTION");
    ::unsetenv("RPMEM_TIMEOUT");
  }
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_NET_CUT_H
