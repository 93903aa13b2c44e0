// SPDX-License-Identifier: BSD-3-Clause
// A stranger who recorded a lane's first bytes cannot take the lane over:
// a claim proves the session secret with a MAC over its lane, epoch and a
// nonce (protocol 1.9), so a recording is admitted at no other epoch --
// neither the next one nor the last one, 65535 -- and is refused where it
// was; the client's lane goes on undisturbed. A claim of a client before
// 1.9 shows the secret, and opens epoch 0 only. Recorded as an attacker
// would: the hello a raw client sent, and (as root) the hello librpmem
// sent, captured on the loopback interface.
#include "tests/integration/block_writer.h"
#include "tests/integration/harness.h"
#include "tests/integration/raw_peer.h"
#include "tests/integration/tls_peer.h"

#include <gtest/gtest.h>

#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
constexpr uint32_t kLanes = 2;

// The hello `h` at another epoch: the u16 after the proof and the lane.
proto::Bytes at_epoch(proto::Bytes h, uint16_t epoch) {
  rpmem::wire::store_le(h.data() + 8 + proto::kSecretSize + 2, epoch, 2);
  return h;
}

// A stranger's connection playing `hello`: the target's answer (0
// admitted), nullopt when it closed unanswered.
std::optional<uint32_t> stranger(uint16_t port, const proto::Bytes &hello) {
  PlainPeer s(port);
  uint8_t r[proto::kLaneHelloReplySize];
  if (!s.send(hello.data(), hello.size()) || !s.recv(r, sizeof(r))) return std::nullopt;
  return proto::decode_lane_hello_reply(r);
}

class LaneClaims : public ::testing::Test {
 protected:
  void SetUp() override {
    if (verbs_only()) GTEST_SKIP() << "the raw lanes here are tcp lanes, and tcp is disabled";
    target_.write_poolset("t.set", {{kPool, "t.part"}}, "OPTION NOHDRS\n");
  }
  std::optional<proto::PoolResponse> create(RawDaemon &d, uint16_t minor) {
    if (!d.read_hello()) return std::nullopt;
    proto::PoolRequest req = pool_request("t.set", kPool, kLanes, false);
    req.minor = minor;
    return d.request(proto::MsgType::kCreate, req);
  }
  bool part_has(uint64_t offset, const proto::Bytes &b) const {
    const auto part = read_file(target_.part_path("t.part"));
    return part.size() >= offset + b.size() &&
           std::equal(b.begin(), b.end(), part.begin() + static_cast<long>(offset));
  }
  static proto::Bytes pattern(size_t n, uint8_t seed) {
    proto::Bytes b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 11);
    return b;
  }
  Target target_;
};

TEST_F(LaneClaims, ARecordedHelloIsAdmittedAtNoEpochAndTheLaneGoesOn) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  PlainPeer lane(r->port);
  const proto::Bytes recorded = lane_hello_bytes(r->secret, 0, kLanes);
  EXPECT_EQ(std::search(recorded.begin(), recorded.end(), r->secret.begin(), r->secret.end()),
            recorded.end())
      << "the hello shows the secret";
  uint32_t reply = 1;
  ASSERT_TRUE(lane.send(recorded.data(), recorded.size()));
  uint8_t rb[proto::kLaneHelloReplySize];
  ASSERT_TRUE(lane.recv(rb, sizeof(rb)));
  reply = proto::decode_lane_hello_reply(rb);
  ASSERT_EQ(reply, 0u);
  for (uint16_t epoch : {uint16_t{0}, uint16_t{1}, uint16_t{2}, uint16_t{65535}}) {
    const auto answer = stranger(r->port, at_epoch(recorded, epoch));
    EXPECT_NE(answer, std::optional<uint32_t>(0)) << "a recording admitted at epoch " << epoch;
  }
  // The lane was never dropped: its persist lands on the same connection.
  const proto::Bytes bytes = pattern(4000, 1);
  EXPECT_EQ(lane_persist(lane, 8192, bytes), 0);
  EXPECT_TRUE(part_has(8192, bytes));
  // No epoch was burnt: the client's own claim at epoch 1 comes back.
  PlainPeer back(r->port);
  const proto::Bytes mine = lane_hello_bytes(r->secret, 0, kLanes, 1);
  ASSERT_TRUE(back.send(mine.data(), mine.size()));
  ASSERT_TRUE(back.recv(rb, sizeof(rb)));
  EXPECT_EQ(proto::decode_lane_hello_reply(rb), 0u);
  const proto::Bytes more = pattern(4000, 2);
  EXPECT_EQ(lane_persist(back, 16384, more), 0);
  EXPECT_TRUE(part_has(16384, more));
  const std::string log = target_.log_text();
  EXPECT_TRUE(target_.log_shows("wrong session secret")) << log;
  EXPECT_TRUE(target_.log_shows("lane already connected")) << log;
  EXPECT_TRUE(target_.log_shows("lane 0 of 2 came back")) << log;
  EXPECT_EQ(log.find("epoch 2"), std::string::npos) << log;
  EXPECT_EQ(log.find("epoch 65535"), std::string::npos) << log;
}

// A client of 1.8 showed its secret in clear: its claims open epoch 0 and
// nothing after, whoever sends them.
TEST_F(LaneClaims, AClaimThatShowsTheSecretOpensEpochZeroOnly) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinorVerbsResume);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  PlainPeer lane(r->port);
  const proto::Bytes recorded = lane_hello_bytes(r->secret, 1, kLanes, 0, false);
  uint8_t rb[proto::kLaneHelloReplySize];
  ASSERT_TRUE(lane.send(recorded.data(), recorded.size()) && lane.recv(rb, sizeof(rb)));
  ASSERT_EQ(proto::decode_lane_hello_reply(rb), 0u);
  for (uint16_t epoch : {uint16_t{1}, uint16_t{65535}})
    EXPECT_NE(stranger(r->port, at_epoch(recorded, epoch)), std::optional<uint32_t>(0)) << epoch;
  const proto::Bytes bytes = pattern(3000, 3);
  EXPECT_EQ(lane_persist(lane, 20480, bytes), 0);
  EXPECT_TRUE(part_has(20480, bytes));
  EXPECT_TRUE(target_.log_shows("a lane that comes back from a client that shows its secret"))
      << target_.log_text();
}

// The local TCP ports of this process's sockets (over IPv4): its inodes in
// /proc/self/fd, their ports in /proc/net/tcp.
std::set<uint16_t> own_tcp_ports() {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string link = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && link.rfind("socket:[", 0) == 0) inodes.insert(link.substr(8, link.size() - 9));
  }
  std::set<uint16_t> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the heading
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
    in >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (const auto colon = local.find(':'); colon != std::string::npos && inodes.count(inode))
      ports.insert(static_cast<uint16_t>(std::stoul(local.substr(colon + 1), nullptr, 16)));
  }
  return ports;
}

// Captures, on the loopback interface, the lane hellos sent to data ports
// (TCP payloads of a hello's size that start with its magic), and gives
// the first that this process sent: tests beside it connect lanes too.
// Needs CAP_NET_RAW.
class HelloCapture {
 public:
  bool open(std::string &why) {
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd_ < 0) {
      why = std::string("no packet socket: ") + strerror(errno);
      return false;
    }
    sockaddr_ll ll{};
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_ALL);
    ll.sll_ifindex = static_cast<int>(::if_nametoindex("lo"));
    timeval tv{0, 100000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (::bind(fd_, reinterpret_cast<sockaddr *>(&ll), sizeof(ll)) != 0) {
      why = std::string("cannot capture on lo: ") + strerror(errno);
      return false;
    }
    thread_ = std::thread([this] { run(); });
    return true;
  }
  ~HelloCapture() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  // The hello this process sent and the port it went to, once one was seen.
  std::optional<std::pair<proto::Bytes, uint16_t>> hello() {
    const std::set<uint16_t> own = own_tcp_ports();
    std::lock_guard lock(mu_);
    for (const Seen &h : seen_)
      if (own.count(h.from)) return std::make_pair(h.bytes, h.to);
    return std::nullopt;
  }

 private:
  void run() {
    uint8_t pkt[65536];
    while (!stop_) {
      const ssize_t n = ::recv(fd_, pkt, sizeof(pkt), 0);
      if (n <= 14 + 20 + 20) continue;
      const uint8_t *ip = pkt + 14;  // lo's frames carry an Ethernet header
      if ((ip[0] >> 4) != 4 || ip[9] != IPPROTO_TCP) continue;
      const size_t ihl = (ip[0] & 0xf) * 4u;
      const size_t total = static_cast<size_t>(ip[2] << 8 | ip[3]);
      const uint8_t *tcp = ip + ihl;
      const size_t thl = (tcp[12] >> 4) * 4u;
      if (total < ihl + thl) continue;
      const size_t len = total - ihl - thl;
      const uint8_t *payload = tcp + thl;
      if (len != proto::kLaneHelloSize || rpmem::wire::load_le(payload, 4) != proto::kLaneMagic)
        continue;
      std::lock_guard lock(mu_);
      if (seen_.size() < 1000)
        seen_.push_back({proto::Bytes(payload, payload + len),
                         static_cast<uint16_t>(tcp[0] << 8 | tcp[1]),
                         static_cast<uint16_t>(tcp[2] << 8 | tcp[3])});
    }
  }
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  struct Seen {
    proto::Bytes bytes;
    uint16_t from, to;  // ports
  };
  std::vector<Seen> seen_;
};

// librpmem's own hello, captured off the wire while it streams persists,
// played by a stranger at the next epoch and at 65535: refused, and not
// one of the client's calls notices.
TEST_F(LaneClaims, ACapturedHelloOfLibrpmemCannotDisturbItsLanes) {
  if (std::getenv("RPMEM_DATA_TLS")) GTEST_SKIP() << "the lanes are encrypted in this pass";
  HelloCapture cap;
  std::string why;
  if (!cap.open(why)) GTEST_SKIP() << why;
  set_env("RPMEM_CMD", target_.rpmemd_cmd());
  LocalPool local(kPool, 5);
  unsigned nlanes = kLanes;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "t.set", local.data(), kPool, &nlanes, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  std::optional<std::pair<proto::Bytes, uint16_t>> seen;
  for (int i = 0; i < 50 && !(seen = cap.hello()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(seen) << "no lane hello on the wire";
  BlockWriter w[2];
  for (unsigned i = 0; i < 2; ++i) w[i].start(rpp, local.data(), i, 4096 + i * kMiB, 64);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint16_t epoch = static_cast<uint16_t>(
      rpmem::wire::load_le(seen->first.data() + 8 + proto::kSecretSize + 2, 2));
  for (uint16_t e : {static_cast<uint16_t>(epoch + 1), uint16_t{65535}})
    EXPECT_NE(stranger(seen->second, at_epoch(seen->first, e)), std::optional<uint32_t>(0)) << e;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (auto &x : w) x.join();
  for (auto &x : w) EXPECT_EQ(x.err, 0) << x.msg;
  std::vector<uint8_t> back(64 * 4096);
  for (unsigned lane = 0; lane < 2; ++lane) {
    ASSERT_EQ(rpmem_read(rpp, back.data(), 4096 + lane * kMiB, back.size(), lane), 0);
    EXPECT_TRUE(same_bytes(back.data(), local.data() + 4096 + lane * kMiB, 0, back.size()));
  }
  ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  const std::string log = target_.log_text();
  EXPECT_TRUE(target_.log_shows("wrong session secret")) << log;
  EXPECT_EQ(log.find("came back"), std::string::npos) << "the client's lane was taken:\n" << log;
  EXPECT_EQ(library_log().find("connecting again"), std::string::npos) << library_log();
}

}  // namespace
}  // namespace rpmem_test
