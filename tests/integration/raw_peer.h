// SPDX-License-Identifier: BSD-3-Clause
// Raw peers for the hostile and fault tests: an rpmemd started directly on a
// socketpair (the test plays the client, byte by byte), raw TCP connections
// to a data port, process helpers and a snapshot of a target's files.
#ifndef RPMEM_TESTS_INTEGRATION_RAW_PEER_H
#define RPMEM_TESTS_INTEGRATION_RAW_PEER_H

#include "common/proto.h"
#include "common/transport/lane_proof.h"
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace rpmem_test {

namespace proto = rpmem::proto;
using Clock = std::chrono::steady_clock;

// Reads exactly n bytes within timeout_ms; false on EOF, error or timeout.
inline bool read_exact_fd(int fd, void *buf, size_t n, int timeout_ms = 10000) {
  auto *p = static_cast<uint8_t *>(buf);
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n > 0) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Writes all bytes; false when the peer is gone.
inline bool write_all_fd(int fd, const void *buf, size_t n) {
  const auto *p = static_cast<const uint8_t *>(buf);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
inline bool write_all_fd(int fd, const proto::Bytes &b) {
  return write_all_fd(fd, b.data(), b.size());
}

// True once the peer closed the connection (EOF or reset) within timeout_ms;
// bytes that arrive before are discarded.
inline bool peer_closes(int fd, int timeout_ms = 10000) {
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  uint8_t buf[4096];
  while (Clock::now() < end) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
  return false;
}

// Waits up to `limit` for child `pid` of this process; its wait status, or
// nullopt (it is then killed and reaped).
inline std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds limit) {
  auto end = Clock::now() + limit;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (Clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return std::nullopt;
}

inline std::string describe_status(const std::optional<int> &st) {
  if (!st) return "did not exit in time";
  if (WIFEXITED(*st)) return "exit " + std::to_string(WEXITSTATUS(*st));
  if (WIFSIGNALED(*st))
    return "signal " + std::to_string(WTERMSIG(*st)) + (WCOREDUMP(*st) ? " (core)" : "");
  return "status " + std::to_string(*st);
}

// A child process that runs `body` with the write end of a pipe and exits
// with what it returns; the parent gets its pid (-1 when pipe or fork
// failed) and the read end, to close.
struct PipedChild {
  pid_t pid = -1;
  int from_child = -1;
};
inline PipedChild fork_piped(const std::function<int(int to_parent)> &body) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::_exit(body(fds[1]));
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return {};
  }
  return {pid, fds[0]};
}

// An rpmemd on a socketpair: the test is its client. It reads the Target's
// config and gets SSH_CONNECTION for loopback.
class RawDaemon {
 public:
  explicit RawDaemon(const Target &t, const std::vector<std::string> &extra = {}) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw std::runtime_error("socketpair");
    std::vector<std::string> args{RPMEMD_PATH, "-c", t.dir() + "/rpmemd.conf"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    ::setenv("SSH_CONNECTION", "127.0.0.1 50000 127.0.0.1 22", 1);
    int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    ::unsetenv("SSH_CONNECTION");
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    fd_ = sv[0];
    if (rc != 0) throw std::runtime_error("posix_spawn rpmemd");
  }
  ~RawDaemon() {
    if (fd_ >= 0) ::close(fd_);
    if (!reaped_) wait_child(pid_, std::chrono::seconds(5));
  }
  RawDaemon(const RawDaemon &) = delete;
  RawDaemon &operator=(const RawDaemon &) = delete;

  int fd() const { return fd_; }
  pid_t pid() const { return pid_; }

  // Reads one frame; nullopt on EOF, timeout or a malformed header.
  std::optional<proto::FrameHeader> read_frame(proto::Bytes &payload, int timeout_ms = 10000) {
    uint8_t raw[proto::kFrameHeaderSize];
    if (!read_exact_fd(fd_, raw, sizeof(raw), timeout_ms)) return std::nullopt;
    auto h = proto::decode_frame_header(raw);
    if (!h) return std::nullopt;
    payload.resize(h->size);
    if (!read_exact_fd(fd_, payload.data(), payload.size(), timeout_ms)) return std::nullopt;
    return h;
  }
  bool read_hello() {
    proto::Bytes p;
    auto h = read_frame(p);
    return h && h->type == proto::MsgType::kHello && proto::decode_hello(p) &&
           proto::decode_hello(p)->status == 0;
  }
  bool send(const proto::Bytes &b) { return write_all_fd(fd_, b); }
  // Sends a pool request of `type` and takes the answer (nullopt: none, or
  // malformed).
  std::optional<proto::PoolResponse> request(proto::MsgType type, const proto::PoolRequest &req) {
    if (!send(proto::encode(type, req))) return std::nullopt;
    proto::Bytes p;
    auto h = read_frame(p);
    if (!h || h->type != proto::MsgType::kPoolResp) return std::nullopt;
    return proto::decode_pool_response(p);
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Waits for the daemon to exit by itself; its wait status.
  std::optional<int> wait(std::chrono::milliseconds limit = std::chrono::seconds(15)) {
    reaped_ = true;
    return wait_child(pid_, limit);
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
};

// A create request for pool set `name` as librpmem would send it.
inline proto::PoolRequest pool_request(const std::string &name, uint64_t size, uint32_t nlanes,
                                       bool with_attr) {
  proto::PoolRequest r;
  r.nlanes = nlanes;
  r.pool_size = size;
  r.transports = proto::transport_bit(proto::TransportKind::kTcp);
  r.pool_set = name;
  if (with_attr) {
    std::memcpy(r.attr.signature.data(), "PMEMOBJ", 7);
    r.attr.major = 6;
    for (int i = 0; i < 16; ++i) r.attr.poolset_uuid[i] = static_cast<uint8_t>(i + 1);
  }
  return r;
}

// The first bytes of a data connection: lane `lane` of `nlanes`, proving
// `secret`, at `epoch` (above 0: the lane comes back).
inline proto::Bytes lane_hello_bytes(const proto::Secret &secret, uint32_t lane, uint32_t nlanes,
                                     uint16_t epoch = 0, bool mac = true) {
  uint8_t b[proto::kLaneHelloSize];
  proto::LaneHello h{.lane = lane, .epoch = epoch, .nlanes = nlanes};
  if (rpmem::transport::prove(secret, {lane, epoch, nlanes}, mac, h.proof))
    throw std::runtime_error("no lane proof");
  proto::encode(h, b);
  return proto::Bytes(b, b + sizeof(b));
}

// A TCP connection to 127.0.0.1:port; -1 on failure.
inline int connect_port(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A cleartext lane: the socket itself, connected to 127.0.0.1:port.
class PlainPeer {
 public:
  explicit PlainPeer(uint16_t port) : fd_(connect_port(port)) {}
  ~PlainPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  PlainPeer(const PlainPeer &) = delete;
  PlainPeer &operator=(const PlainPeer &) = delete;
  int fd() const { return fd_; }
  bool send(const void *p, size_t n) { return fd_ >= 0 && write_all_fd(fd_, p, n); }
  bool recv(void *p, size_t n) { return fd_ >= 0 && read_exact_fd(fd_, p, n, 5000); }

 private:
  int fd_;
};

// The data port rpmemd logged ("    port: N") last; 0 if none.
inline uint16_t data_port_from_log(const std::string &log) {
  // "    port: N" in the create/open request response block.
  const std::string key = "\n    port: ";
  auto at = log.rfind(key);
  if (at == std::string::npos) return 0;
  return static_cast<uint16_t>(std::stoul(log.substr(at + key.size())));
}

// Every regular file under dir with its contents, except rpmemd's log and
// pid file: what a hostile peer must not change (or add to).
inline std::map<std::string, std::vector<uint8_t>> snapshot(const std::string &dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (auto &e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    auto name = e.path().filename().string();
    if (name == "rpmemd.log" || name == "rpmemd.pid") continue;
    out[e.path().string()] = read_file(e.path().string());
  }
  return out;
}

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_RAW_PEER_H
