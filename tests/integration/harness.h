// SPDX-License-Identifier: BSD-3-Clause
// Test harness: a throw-away target (pool set directory, rpmemd config and
// log) reached through the local ssh stand-in, local pools, and readers of
// what landed in the part files.
#ifndef RPMEM_TESTS_INTEGRATION_HARNESS_H
#define RPMEM_TESTS_INTEGRATION_HARNESS_H

#include <gtest/gtest.h>

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {

inline constexpr size_t kMiB = 1024 * 1024;

struct Part {
  size_t size;
  std::string file;  // name inside the target's directory
};

// A target node on this machine: a directory with a pool set directory, an
// rpmemd config file and its log. The constructor points RPMEM_SSH and
// RPMEM_CMD at it; the destructor removes the directory.
class Target {
 public:
  Target();
  ~Target();
  Target(const Target &) = delete;
  Target &operator=(const Target &) = delete;

  const std::string &dir() const { return dir_; }
  const std::string &poolset_dir() const { return poolset_dir_; }
  std::string pid_file() const { return dir_ + "/rpmemd.pid"; }
  // The rpmemd command line RPMEM_CMD gets: records its pid, then execs.
  std::string rpmemd_cmd(const std::string &extra_args = "") const;

  // Writes pool set `name` (relative to the pool set directory) with parts
  // in dir(); `options`: e.g. "OPTION NOHDRS\n".
  void write_poolset(const std::string &name, const std::vector<Part> &parts,
                     const std::string &options = "");
  std::string part_path(const std::string &file) const { return dir_ + "/" + file; }
  std::string log_text() const;
  // Waits until the daemon's log holds `what` (see file_shows).
  bool log_shows(const std::string &what) const;

  // pid of the rpmemd serving the last create/open (from pid_file()).
  pid_t rpmemd_pid() const;

  // The remote pool as the client addresses it, assembled from the part
  // files: part 0 whole, later parts without their header unless SINGLEHDR
  // or NOHDRS.
  std::vector<uint8_t> remote_pool(const std::vector<Part> &parts, bool headers_each_part) const;

 private:
  std::string dir_, poolset_dir_, conf_;
};

// A page-aligned local pool filled with a pattern.
class LocalPool {
 public:
  explicit LocalPool(size_t size, uint8_t seed = 1);
  ~LocalPool();
  LocalPool(const LocalPool &) = delete;
  LocalPool &operator=(const LocalPool &) = delete;
  uint8_t *data() const { return static_cast<uint8_t *>(addr_); }
  size_t size() const { return size_; }
  void fill(size_t offset, size_t length, uint8_t seed);

 private:
  void *addr_;
  size_t size_;
};

// A target with pool set p.set of one part, p.part0 (kOnePool bytes, no
// header), and a local pool of that size; create() creates it with
// nlanes_ lanes.
inline constexpr size_t kOnePool = 4 * kMiB;
class OnePartPool : public ::testing::Test {
 protected:
  RPMEMpool *create() {
    target_.write_poolset("p.set", {{kOnePool, "p.part0"}}, "OPTION NOHDRS\n");
    RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local_.data(), kOnePool, &nlanes_, nullptr);
    EXPECT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
    return rpp;
  }
  Target target_;
  LocalPool local_{kOnePool};
  unsigned nlanes_ = 4;
};

// librpmem's own log: this process sets RPMEM_LOG_LEVEL=2 (errors and
// warnings) and RPMEM_LOG_FILE before its first call, unless they are set
// already. library_log() is what the file holds ("" without it).
std::string library_log();

std::vector<uint8_t> read_file(const std::string &path);
// What `cmd` (run by sh) prints on stdout; its wait status in *status.
std::string command_output(const std::string &cmd, int *status = nullptr);
bool file_exists(const std::string &path);
// Waits, at most `limit`, until the file at `path` holds `what`. A daemon
// writes its log line about a refusal after the peer has seen the refusal:
// a test that reads the log at once races the daemon.
bool file_shows(const std::string &path, const std::string &what,
                std::chrono::milliseconds limit = std::chrono::seconds(5));
// True when `dir` is on tmpfs or ramfs: rpmemd keeps its pools in RAM there.
bool in_ram(const std::string &dir);
void set_env(const char *name, const std::string &value);
// RPMEM_TEST_TRANSPORT=verbs: every Target disables tcp (RPMEM_ENABLE_SOCKETS=0).
bool verbs_only();
// What holds the daemon's pools: "pmem" (RPMEM_TEST_MEDIUM=pmem, set by the
// scripts that put RPMEM_TEST_DIR on an NVDIMM), else "ram" (tmpfs) or "disk".
std::string test_medium();

// True when bytes [off, off+len) of a and b are equal; explains otherwise.
::testing::AssertionResult same_bytes(const uint8_t *a, const uint8_t *b, size_t off, size_t len);

// Attributes with every field set, as an application would pass them.
rpmem_pool_attr sample_attr(uint8_t seed);

// The address the tests' servers (a service, a private sshd) listen on and
// clients reach them at: 127.0.0.1, or over verbs the VM's own address
// (RPMEM_VM_IP), since loopback has no RDMA route and the daemon serves its
// lanes on the address the client came to.
std::string test_ip();

// A free TCP port on test_ip() (bound and released; the caller's server
// takes it next), and whether something accepts connections there.
int free_port();
bool can_connect(int port);

// True when process `pid` has exited (a zombie counts: its parent may be
// gone, or be this process when ssh is the local stand-in).
bool exited(pid_t pid);
// Waits, at most `limit`, until process `pid` has exited.
bool wait_gone(pid_t pid, std::chrono::seconds limit);
// Sends SIGSTOP to process `pid` and waits, at most `limit`, until every one
// of its threads has stopped: kill() returns before a thread that is running
// on another CPU has taken the signal, and it may answer a request meanwhile.
bool stop_process(pid_t pid, std::chrono::seconds limit);

// Number of child processes of this process that are zombies.
int zombie_children();

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_HARNESS_H
