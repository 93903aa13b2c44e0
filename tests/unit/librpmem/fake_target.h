// SPDX-License-Identifier: BSD-3-Clause
// Fakes behind librpmem's Connector seam, for unit tests of a pool's rules:
// a daemon that answers the control protocol as scripted (FakeDaemon), its
// control channels (FakeChannel: whole frames both ways, a hang-up the test
// causes), lanes that record their calls and fail or stall as told
// (FakeLane), and the connector that hands them out (FakeConnector). Lanes
// made with a replica copy what they write into it (the daemon's pool),
// which the daemon's checksums read.
#ifndef RPMEM_TESTS_UNIT_LIBRPMEM_FAKE_TARGET_H
#define RPMEM_TESTS_UNIT_LIBRPMEM_FAKE_TARGET_H

#include "common/page_sum.h"
#include "common/proto.h"
#include "common/transport/transport.h"
#include "librpmem/connector.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rpmem::test {

using namespace std::chrono_literals;

// One lane: each call is recorded; it returns `next` (consumed) or `always`,
// and with `stall` it waits until shut down (then ECONNRESET). With a
// replica, a write takes the local bytes when it is called and lands them
// there on its return (after the `in_flight` hook, which the test may use
// to write meanwhile), a read copies from it.
class FakeLane final : public transport::InitiatorLane {
 public:
  struct Call {
    transport::DataOp op;
    uint64_t offset, length;
    unsigned flags;
  };
  FakeLane() = default;
  FakeLane(const uint8_t *local, uint8_t *replica) : local_(local), replica_(replica) {}
  std::error_code write(transport::DataOp op, uint64_t offset, uint64_t length,
                        unsigned flags) noexcept override {
    std::vector<uint8_t> taken;
    if (local_ && replica_) taken.assign(local_ + offset, local_ + offset + length);
    const Call c{op, offset, length, flags};
    if (auto ec = record(c)) return ec;
    if (in_flight) in_flight(c);
    if (replica_ && !drop_bytes(c)) std::memcpy(replica_ + offset, taken.data(), taken.size());
    return {};
  }
  std::error_code drain(unsigned flags) noexcept override {
    return record({transport::DataOp::kDrain, 0, 0, flags});
  }
  std::error_code read(void *buf, uint64_t offset, uint64_t length) noexcept override {
    if (auto ec = record({transport::DataOp::kRead, offset, length, 0})) return ec;
    if (replica_) std::memcpy(buf, replica_ + offset, length);
    return {};
  }
  void shutdown() noexcept override {
    std::lock_guard lock(mu_);
    dead_ = true;
    cv_.notify_all();
  }
  std::string failure() const override {
    std::lock_guard lock(mu_);
    return failure_;
  }
  std::vector<transport::PoolRange> unacknowledged() const override {
    std::lock_guard lock(mu_);
    return unacked_;
  }

  // Scripting, from the test.
  void fail_next(int err, std::string why = {}) {
    std::lock_guard lock(mu_);
    next_.push_back(err);
    if (!why.empty()) failure_ = std::move(why);
  }
  void stall() {
    std::lock_guard lock(mu_);
    stall_ = true;
  }
  // What unacknowledged() says from now on.
  void unacked(std::vector<transport::PoolRange> r) {
    std::lock_guard lock(mu_);
    unacked_ = std::move(r);
  }
  // The next `n` writes are acknowledged without landing.
  void drop_writes(int n) {
    std::lock_guard lock(mu_);
    drops_ = n;
  }
  std::function<void(const Call &)> in_flight;
  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  bool dead() const {
    std::lock_guard lock(mu_);
    return dead_;
  }
  // Waits until a call is in progress (stalled).
  bool wait_stalled(std::chrono::milliseconds limit = 2s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return stalled_; });
  }

 private:
  std::error_code record(const Call &c) {
    std::unique_lock lock(mu_);
    calls_.push_back(c);
    if (dead_) return errc(ECONNRESET);
    if (stall_) {
      stalled_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return dead_; });
      return errc(ECONNRESET);
    }
    if (next_.empty()) return {};
    const int err = next_.front();
    next_.pop_front();
    return err ? errc(err) : std::error_code{};
  }

  bool drop_bytes(const Call &) {
    std::lock_guard lock(mu_);
    return drops_ > 0 && drops_-- > 0;
  }

  const uint8_t *local_ = nullptr;
  uint8_t *replica_ = nullptr;
  int drops_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call> calls_;
  std::deque<int> next_;
  std::vector<transport::PoolRange> unacked_;
  std::string failure_;
  bool stall_ = false, stalled_ = false, dead_ = false;
};

class FakeDaemon;

// A control channel to the fake daemon: what the client sends goes to it,
// what it answers comes back in order; hang_up() ends it as rpmemd would.
class FakeChannel final : public ControlChannel {
 public:
  explicit FakeChannel(FakeDaemon &d);
  ~FakeChannel() override;
  std::error_code send(const proto::Bytes &frame, std::chrono::milliseconds) noexcept override;
  std::error_code recv(proto::MsgType expected, proto::Bytes &payload,
                       std::chrono::milliseconds timeout) noexcept override;
  void close(std::chrono::milliseconds) noexcept override { hang_up(); }
  int hangup_fd() const noexcept override { return pipe_[0]; }

  void answer(const proto::Bytes &frame) {
    std::lock_guard lock(mu_);
    in_.push_back(frame);
    cv_.notify_all();
  }
  void hang_up() {
    std::lock_guard lock(mu_);
    if (pipe_[1] >= 0) ::close(pipe_[1]);
    pipe_[1] = -1;
    cv_.notify_all();
  }
  // Answers are held back (a daemon that does not answer) until released.
  void hold(bool on) {
    std::lock_guard lock(mu_);
    held_ = on;
    cv_.notify_all();
  }

 private:
  FakeDaemon &daemon_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<proto::Bytes> in_;
  bool held_ = false;
  int pipe_[2] = {-1, -1};
};

// The daemon: one pool, answered as scripted. Thread-safe.
class FakeDaemon {
 public:
  // What the next pool requests are answered with (then success).
  void answer_next(proto::Status s) {
    std::lock_guard lock(mu_);
    statuses_.push_back(s);
  }
  void down(bool on) {
    std::lock_guard lock(mu_);
    down_ = on;
  }
  bool is_down() const {
    std::lock_guard lock(mu_);
    return down_;
  }
  // The pool requests and other messages it was sent.
  std::vector<proto::PoolRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::vector<proto::MsgType> messages() const {
    std::lock_guard lock(mu_);
    return messages_;
  }
  // The channels it has served, the last one last.
  std::shared_ptr<FakeChannel> last_channel() const {
    std::lock_guard lock(mu_);
    return channels_.empty() ? nullptr : channels_.back().lock();
  }
  void served(const std::shared_ptr<FakeChannel> &ch) {
    std::lock_guard lock(mu_);
    channels_.push_back(ch);
  }
  uint16_t port() const {
    std::lock_guard lock(mu_);
    return port_;
  }
  // The protocol minor of its hello.
  void minor(uint16_t m) {
    std::lock_guard lock(mu_);
    minor_ = m;
  }
  // Its pool's bytes, which lanes made with it write into.
  std::vector<uint8_t> replica;
  // The reports of the client's pool it was sent.
  std::vector<proto::PoolStateReport> reports() const {
    std::lock_guard lock(mu_);
    return reports_;
  }

  proto::Bytes hello() const {
    std::lock_guard lock(mu_);
    proto::Hello h;
    h.minor = minor_;
    h.transports = proto::transport_bit(proto::TransportKind::kTcp);
    return proto::encode(h);
  }
  // The answers to one message from the client (none for a keepalive).
  std::vector<proto::Bytes> on_message(proto::MsgType type, const proto::Bytes &payload) {
    std::lock_guard lock(mu_);
    messages_.push_back(type);
    switch (type) {
      case proto::MsgType::kCreate:
      case proto::MsgType::kOpen: {
        auto req = proto::decode_pool_request(payload);
        if (!req) return {};
        requests_.push_back(*req);
        return {proto::encode(response(*req))};
      }
      case proto::MsgType::kSetAttr:
        return {proto::encode(proto::MsgType::kSetAttrResp, proto::StatusResponse{})};
      case proto::MsgType::kClose:
        return {proto::encode(proto::MsgType::kCloseResp, proto::StatusResponse{})};
      case proto::MsgType::kPoolState:
        if (auto r = proto::decode_pool_state(payload)) reports_.push_back(*r);
        return {};
      case proto::MsgType::kChecksum: {
        auto req = proto::decode_checksum_request(payload);
        if (!req) return {};
        proto::ChecksumResponse resp;
        for (const proto::PageRange &r : req->ranges)
          for (uint64_t p = r.first; p < r.first + r.count; ++p) {
            const uint64_t off = p * proto::kChecksumPage;
            resp.sums.push_back(
                page_sum(replica.data() + off,
                         std::min<uint64_t>(proto::kChecksumPage, replica.size() - off)));
          }
        return {proto::encode(resp)};
      }
      default:
        return {};
    }
  }

 private:
  proto::PoolResponse response(const proto::PoolRequest &req) {
    proto::PoolResponse r;
    if (!statuses_.empty()) {
      r.status = statuses_.front();
      statuses_.pop_front();
    }
    r.nlanes = req.nlanes;
    r.port = ++port_;
    r.transport = proto::TransportKind::kTcp;
    r.secret.fill(static_cast<uint8_t>(port_));
    r.remote_size = req.pool_size;
    r.extended = req.minor >= proto::kMinorLaneTls;
    r.tokened = req.minor >= proto::kMinorResume;
    r.token.assign(proto::kTokenSize, static_cast<uint8_t>(port_));
    r.leveled = req.minor >= proto::kMinorLevels;
    return r;
  }

  mutable std::mutex mu_;
  std::deque<proto::Status> statuses_;
  std::vector<proto::PoolRequest> requests_;
  std::vector<proto::MsgType> messages_;
  std::vector<std::weak_ptr<FakeChannel>> channels_;
  std::vector<proto::PoolStateReport> reports_;
  bool down_ = false;
  uint16_t port_ = 7000;
  uint16_t minor_ = proto::kMinor;
};

inline FakeChannel::FakeChannel(FakeDaemon &d) : daemon_(d) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) pipe_[0] = pipe_[1] = -1;
}

inline FakeChannel::~FakeChannel() {
  for (int fd : pipe_)
    if (fd >= 0) ::close(fd);
}

inline std::error_code FakeChannel::send(const proto::Bytes &frame,
                                         std::chrono::milliseconds) noexcept {
  {
    std::lock_guard lock(mu_);
    if (pipe_[1] < 0) return errc(ECONNRESET);
  }
  auto h = proto::decode_frame_header({frame.data(), proto::kFrameHeaderSize});
  if (!h) return errc(EPROTO);
  const proto::Bytes payload(frame.begin() + proto::kFrameHeaderSize, frame.end());
  for (auto &a : daemon_.on_message(h->type, payload)) answer(a);
  return {};
}

inline std::error_code FakeChannel::recv(proto::MsgType expected, proto::Bytes &payload,
                                         std::chrono::milliseconds timeout) noexcept {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return (!in_.empty() && !held_) || pipe_[1] < 0; }))
    return errc(ETIMEDOUT);
  if (in_.empty() || held_) return errc(ECONNRESET);
  const proto::Bytes frame = std::move(in_.front());
  in_.pop_front();
  auto h = proto::decode_frame_header({frame.data(), proto::kFrameHeaderSize});
  if (!h || h->type != expected) return errc(EPROTO);
  payload.assign(frame.begin() + proto::kFrameHeaderSize, frame.end());
  return {};
}

// Hands out channels to the daemon (ECONNREFUSED while it is down) and
// fake lanes, keeping them for the test.
class FakeConnector final : public Connector {
 public:
  explicit FakeConnector(FakeDaemon &d) : daemon_(d) {}
  Result<std::unique_ptr<ControlChannel>> channel(const TargetAddress &, const Settings &,
                                                  std::chrono::milliseconds) override {
    if (daemon_.is_down())
      return Error{errc(ECONNREFUSED), "out-of-band connection failed: Connection refused"};
    auto ch = std::make_shared<FakeChannel>(daemon_);
    daemon_.served(ch);
    ch->answer(daemon_.hello());
    // The pool owns the channel; the daemon and the test keep a weak view
    // of it through a holder that forwards to it.
    return std::unique_ptr<ControlChannel>(new Holder(ch));
  }
  Result<Lanes> lanes(LaneSecurity, const TargetAddress &, const proto::PoolResponse &resp,
                      ControlChannel &, const Settings &,
                      transport::InitiatorParams &params) override {
    route = params.route;
    Lanes out;
    for (unsigned i = 0; i < resp.nlanes; ++i) {
      auto lane = daemon_.replica.empty()
                      ? std::make_shared<FakeLane>()
                      : std::make_shared<FakeLane>(params.local_base, daemon_.replica.data());
      if (on_lanes) on_lanes(*lane, i);
      std::lock_guard lock(mu_);
      made_.push_back(lane);
      out.push_back(std::make_unique<Shared>(std::move(lane)));
    }
    return out;
  }
  // Called with each lane made (and its index in its session), before the
  // pool has it.
  std::function<void(FakeLane &, unsigned)> on_lanes;
  // Every lane made so far, in order (a reattach's after the first open's);
  // the connector keeps them when the pool lets them go.
  std::vector<FakeLane *> lanes() const {
    std::lock_guard lock(mu_);
    std::vector<FakeLane *> out;
    for (const auto &l : made_) out.push_back(l.get());
    return out;
  }
  std::shared_ptr<transport::LaneRoute> route;

 private:
  // Owns a shared FakeChannel for the pool.
  class Holder final : public ControlChannel {
   public:
    explicit Holder(std::shared_ptr<FakeChannel> ch) : ch_(std::move(ch)) {}
    std::error_code send(const proto::Bytes &f, std::chrono::milliseconds t) noexcept override {
      return ch_->send(f, t);
    }
    std::error_code recv(proto::MsgType e, proto::Bytes &p,
                         std::chrono::milliseconds t) noexcept override {
      return ch_->recv(e, p, t);
    }
    void close(std::chrono::milliseconds t) noexcept override { ch_->close(t); }
    int hangup_fd() const noexcept override { return ch_->hangup_fd(); }

   private:
    std::shared_ptr<FakeChannel> ch_;
  };
  // The pool's handle on a lane the connector keeps.
  class Shared final : public transport::InitiatorLane {
   public:
    explicit Shared(std::shared_ptr<FakeLane> l) : l_(std::move(l)) {}
    std::error_code write(transport::DataOp op, uint64_t offset, uint64_t length,
                          unsigned flags) noexcept override {
      return l_->write(op, offset, length, flags);
    }
    std::error_code drain(unsigned flags) noexcept override { return l_->drain(flags); }
    std::error_code read(void *buf, uint64_t offset, uint64_t length) noexcept override {
      return l_->read(buf, offset, length);
    }
    void shutdown() noexcept override { l_->shutdown(); }
    std::vector<transport::PoolRange> unacknowledged() const override {
      return l_->unacknowledged();
    }
    std::string failure() const override { return l_->failure(); }

   private:
    std::shared_ptr<FakeLane> l_;
  };

  FakeDaemon &daemon_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<FakeLane>> made_;
};

}  // namespace rpmem::test

#endif  // RPMEM_TESTS_UNIT_LIBRPMEM_FAKE_TARGET_H
