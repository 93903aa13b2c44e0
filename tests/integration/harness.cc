// SPDX-License-Identifier: BSD-3-Clause
// Test harness for the integration tests.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

namespace rpmem_test {

namespace fs = std::filesystem;

void set_env(const char *name, const std::string &value) { ::setenv(name, value.c_str(), 1); }

namespace {

// Before main, so before the library reads these at its first call.
struct LibraryLog {
  std::string path;
  bool own = false;
  LibraryLog() {
    if (std::getenv("RPMEM_LOG_FILE") || std::getenv("RPMEM_LOG_LEVEL")) {
      if (const char *f = std::getenv("RPMEM_LOG_FILE")) path = f;
      return;
    }
    path = "/tmp/rpmem-test-librpmem-" + std::to_string(::getpid()) + ".log";
    ::setenv("RPMEM_LOG_LEVEL", "2", 1);
    ::setenv("RPMEM_LOG_FILE", path.c_str(), 1);
    own = true;
  }
  ~LibraryLog() {
    if (own) ::unlink(path.c_str());
  }
};
LibraryLog g_library_log;

// ctest's labelled passes of the whole suite name themselves in
// RPMEM_TEST_PASS (gtest_discover_tests cannot give a test more than one
// environment variable): tls-lanes is RPMEM_DATA_TLS=1 and RPMEM_DATA_SEAL=0,
// sealed-lanes RPMEM_DATA_TLS=1; both keep the daemon's pools in RAM
// (RPMEM_TEST_DIR=/dev/shm) unless the caller chose a place for them (the
// VM suites put them on the medium they test). Before main, as above.
struct TestPass {
  TestPass() {
    const char *pass = std::getenv("RPMEM_TEST_PASS");
    if (!pass || !*pass) return;
    const std::string_view p = pass;
    if (p != "tls-lanes" && p != "sealed-lanes") {
      std::fprintf(stderr, "RPMEM_TEST_PASS=%s: not a pass of the suite\n", pass);
      std::exit(2);
    }
    ::setenv("RPMEM_DATA_TLS", "1", 1);
    if (p == "tls-lanes")
      ::setenv("RPMEM_DATA_SEAL", "0", 1);
    else
      ::unsetenv("RPMEM_DATA_SEAL");
    if (in_ram("/dev/shm")) ::setenv("RPMEM_TEST_DIR", "/dev/shm", 0);
  }
};
TestPass g_test_pass;

}  // namespace

std::string library_log() {
  if (g_library_log.path.empty()) return {};
  std::ifstream in(g_library_log.path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Target::Target() {
  // RPMEM_TEST_DIR: where the daemon's pools go (default /tmp), e.g.
  // /dev/shm for pools in RAM.
  const char *base = std::getenv("RPMEM_TEST_DIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/rpmem-test-XXXXXX";
  const char *d = ::mkdtemp(tmpl.data());
  if (!d) throw std::runtime_error("mkdtemp failed");
  dir_ = d;
  ::chmod(d, 0755);
  poolset_dir_ = dir_ + "/poolsets";
  fs::create_directory(poolset_dir_);
  conf_ = dir_ + "/rpmemd.conf";
  std::ofstream(conf_) << "poolset-dir = " << poolset_dir_ << "\n"
                       << "log-file = " << dir_ << "/rpmemd.log\n"
                       << "log-level = info\n";
  set_env("RPMEM_SSH", FAKE_SSH_PATH);
  set_env("RPMEM_CMD", rpmemd_cmd());
  ::unsetenv("RPMEM_ENABLE_SOCKETS");
  ::unsetenv("RPMEM_MAX_NLANES");
  ::unsetenv("FAKE_SSH_CONNECTION");
  if (verbs_only()) {
    // RPMEM_TEST_TRANSPORT=verbs (scripts/test-rdma.sh, in the soft-RoCE VM):
    // no tcp to fall back to, and rpmemd serves lanes on the RDMA address
    // (loopback has no RDMA route; the client follows the daemon there).
    set_env("RPMEM_ENABLE_SOCKETS", "0");
    const char *ip = std::getenv("RPMEM_VM_IP");
    if (ip && *ip) set_env("FAKE_SSH_CONNECTION", std::string(ip) + " 50000 " + ip + " 22");
  }
}

bool verbs_only() {
  const char *t = std::getenv("RPMEM_TEST_TRANSPORT");
  return t && std::string(t) == "verbs";
}

Target::~Target() {
  // A failed test leaves its pool sets, parts and rpmemd.log behind.
  if (::testing::Test::HasFailure()) {
    std::fprintf(stderr, "rpmemd log and pool files kept in %s\n", dir_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string Target::rpmemd_cmd(const std::string &extra_args) const {
  return "echo $$ > " + pid_file() + "; exec " RPMEMD_PATH " -c " + conf_ +
         (extra_args.empty() ? "" : " " + extra_args);
}

void Target::write_poolset(const std::string &name, const std::vector<Part> &parts,
                           const std::string &options) {
  fs::path p = fs::path(poolset_dir_) / name;
  fs::create_directories(p.parent_path());
  std::ofstream out(p);
  out << "PMEMPOOLSET\n" << options;
  for (const auto &part : parts) out << part.size << " " << part_path(part.file) << "\n";
}

std::string Target::log_text() const {
  std::ifstream in(dir_ + "/rpmemd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Target::log_shows(const std::string &what) const {
  return file_shows(dir_ + "/rpmemd.log", what);
}

pid_t Target::rpmemd_pid() const {
  std::ifstream in(pid_file());
  pid_t pid = 0;
  in >> pid;
  return pid;
}

std::vector<uint8_t> Target::remote_pool(const std::vector<Part> &parts,
                                         bool headers_each_part) const {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto bytes = read_file(part_path(parts[i].file));
    size_t usable = bytes.size() / 4096 * 4096;
    size_t from = (i > 0 && headers_each_part) ? 4096 : 0;
    out.insert(out.end(), bytes.begin() + static_cast<long>(from),
               bytes.begin() + static_cast<long>(usable));
  }
  return out;
}

LocalPool::LocalPool(size_t size, uint8_t seed) : size_(size) {
  addr_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr_ == MAP_FAILED) throw std::runtime_error("mmap failed");
  fill(0, size, seed);
}

LocalPool::~LocalPool() { ::munmap(addr_, size_); }

void LocalPool::fill(size_t offset, size_t length, uint8_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < length; ++i) {
    x = x * 1103515245u + 12345u;
    data()[offset + i] = static_cast<uint8_t>(x >> 16);
  }
}

// In large reads: a byte-by-byte stream iterator takes seconds for a part
// file under TSan. (Not by the size the file claims: /proc's say 0.)
std::vector<uint8_t> read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0)
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + in.gcount());
  return bytes;
}

std::string command_output(const std::string &cmd, int *status) {
  std::string out;
  FILE *p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (status) *status = st;
  return out;
}

bool in_ram(const std::string &dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

bool file_exists(const std::string &path) { return ::access(path.c_str(), F_OK) == 0; }

bool file_shows(const std::string &path, const std::string &what, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto bytes = read_file(path);
    if (std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()).find(what) !=
        std::string_view::npos)
      return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

::testing::AssertionResult same_bytes(const uint8_t *a, const uint8_t *b, size_t off, size_t len) {
  for (size_t i = off; i < off + len; ++i) {
    if (a[i] != b[i])
      return ::testing::AssertionFailure()
             << "first difference at offset " << i << ": " << int(a[i]) << " != " << int(b[i]);
  }
  return ::testing::AssertionSuccess();
}

rpmem_pool_attr sample_attr(uint8_t seed) {
  rpmem_pool_attr a{};
  std::memcpy(a.signature, "PMEMOBJ", 8);
  a.major = 6;
  a.compat_features = 0;
  a.incompat_features = 0;
  a.ro_compat_features = 0;
  for (int i = 0; i < 16; ++i) {
    a.poolset_uuid[i] = static_cast<unsigned char>(seed + i);
    a.uuid[i] = static_cast<unsigned char>(seed + 16 + i);
    a.next_uuid[i] = static_cast<unsigned char>(seed + 32 + i);
    a.prev_uuid[i] = static_cast<unsigned char>(seed + 48 + i);
    a.user_flags[i] = static_cast<unsigned char>(seed + 64 + i);
  }
  return a;
}

std::string test_medium() {
  const char *m = std::getenv("RPMEM_TEST_MEDIUM");
  if (m && std::string(m) == "pmem") return "pmem";
  const char *base = std::getenv("RPMEM_TEST_DIR");
  return in_ram(base && *base ? base : "/tmp") ? "ram" : "disk";
}

std::string test_ip() {
  const char *ip = std::getenv("RPMEM_VM_IP");
  return verbs_only() && ip && *ip ? ip : "127.0.0.1";
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, test_ip().c_str(), &a.sin_addr);
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool can_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, test_ip().c_str(), &a.sin_addr);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

namespace {
// The state letter of /proc/.../stat ("pid (comm) S ..."), or 0.
char proc_state(const std::string &stat_path) {
  auto stat = read_file(stat_path);
  std::string s(stat.begin(), stat.end());
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() ? s[close + 2] : 0;
}
}  // namespace

bool exited(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  return proc_state("/proc/" + std::to_string(pid) + "/stat") == 'Z';
}

bool wait_gone(pid_t pid, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (exited(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool stop_process(pid_t pid, std::chrono::seconds limit) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    bool all = true;
    DIR *d = ::opendir(tasks.c_str());
    if (!d) return false;
    while (dirent *e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const char state = proc_state(tasks + "/" + e->d_name + "/stat");
      if (state != 'T' && state != 't') all = false;
    }
    ::closedir(d);
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

int zombie_children() {
  int zombies = 0;
  const std::string self = std::to_string(::getpid());
  DIR *d = ::opendir("/proc");
  if (!d) return -1;
  while (dirent *e = ::readdir(d)) {
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    // pid (comm) state ppid ...
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid == self && state == "Z") ++zombies;
  }
  ::closedir(d);
  return zombies;
}

}  // namespace rpmem_test
