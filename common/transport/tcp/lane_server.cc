// SPDX-License-Identifier: BSD-3-Clause
// The tcp lane server.
#include "common/transport/tcp/lane_server.h"

#include "common/log.h"
#include "common/transport/copy_words.h"
#include "common/transport/flush_ranges.h"
#include "common/transport/spin_gauge.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace rpmem::transport::tcp {

namespace {

constexpr size_t kLaneBuffer = 256 * 1024;
constexpr size_t kMaxPendingFlushes = 64;
// Requests served on one lane before the other ready lanes get their turn.
constexpr unsigned kBurst = 64;
constexpr int kMaxEvents = 64;
// At most one lane server per two CPUs spins for the next request.
using ServerSpinSlots = SpinSlots<LaneServer>;

// Buffered receive side of one lane. It never waits: each call takes what
// has arrived, and an error (EOF included) is kept.
class LaneReader {
 public:
  explicit LaneReader(ByteStream &s) : s_(s), buf_(new uint8_t[kLaneBuffer]) {}

  size_t buffered() const { return w_ - r_; }
  const uint8_t *data() const { return buf_.get() + r_; }
  void consume(size_t n) { r_ += n; }

  // Appends what has arrived to what is buffered; `got`: bytes added.
  std::error_code fill(size_t &got) {
    got = 0;
    if (error_) return error_;
    if (r_ == w_) {
      r_ = w_ = 0;
    } else if (r_ > 0) {
      std::memmove(buf_.get(), buf_.get() + r_, w_ - r_);
      w_ -= r_;
      r_ = 0;
    }
    error_ = s_.recv_scratch_nowait(buf_.get() + w_, kLaneBuffer - w_, got);
    w_ += got;
    return error_;
  }

  // Payload straight into the pool: what is buffered, then what has
  // arrived. `done`: bytes of dst written.
  std::error_code take_direct(uint8_t *dst, size_t n, size_t &done) {
    done = std::min(n, buffered());
    std::memcpy(dst, data(), done);
    consume(done);
    if (done == n || error_) return error_;
    size_t got = 0;
    error_ = s_.recv_nowait(dst + done, n - done, got);
    done += got;
    return error_;
  }

  // Payload through the buffer, copied with whole-word stores. Until the
  // last byte has come, it stops at a word boundary of the destination and
  // keeps the bytes of a partly received word: no word is ever written in
  // two parts. `done`: bytes of dst written.
  std::error_code take_atomic(uint8_t *dst, size_t n, size_t &done) {
    done = 0;
    for (;;) {
      size_t take = std::min(n - done, buffered());
      if (take < n - done) {
        const size_t cut = reinterpret_cast<uintptr_t>(dst + done + take) % 8;
        take = take >= cut ? take - cut : 0;
      }
      if (take > 0) {
        copy_words(dst + done, data(), take);
        consume(take);
        done += take;
      }
      if (done == n) return {};
      size_t got = 0;
      if (auto ec = fill(got)) return ec;
      if (got == 0) return {};
    }
  }

 private:
  ByteStream &s_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t r_ = 0, w_ = 0;
  std::error_code error_;
};

}  // namespace

// One lane: its stream, its receive buffer, where it is in its request, the
// reply in progress, and the flushes it has not made durable yet.
struct LaneServer::Lane {
  enum class State {
    kHeader,   // waiting for (the rest of) a request header
    kPayload,  // receiving a write's payload into the pool
    kReply,    // sending a reply
  };

  Lane(std::unique_ptr<ByteStream> s, unsigned number_, TargetPool &pool_)
      : stream(std::move(s)), number(number_), pool(pool_), in(*stream) {}
  ~Lane() {  // what was flushed is made durable however the lane ends
    std::error_code ignored;
    persist_flushes(ignored);
  }
  Lane(const Lane &) = delete;
  Lane &operator=(const Lane &) = delete;

  void persist_flushes(std::error_code &error) {
    for (const auto &r : flushes.ranges()) {
      std::error_code ec = pool.persist(r.offset, r.length, false);
      if (ec && !error) error = ec;
    }
    flushes.clear();
  }
  void flush_pending() { persist_flushes(flush_error); }

  std::unique_ptr<ByteStream> stream;
  const unsigned number;
  TargetPool &pool;
  LaneReader in;
  FlushRanges flushes{kMaxPendingFlushes};
  std::error_code flush_error;  // reported by the next drain

  State state = State::kHeader;
  proto::DataRequest req{};
  LaneCounters *counters = nullptr;  // null: not counted
  int64_t started_ns = 0;            // the request's header came (counted lanes)
  // The payload is taken whole into the buffer and written durably in one
  // step (a persist to a pool on a disk); `written` is how that went.
  bool whole = false;
  std::error_code written;
  uint8_t *dst = nullptr;  // where the rest of the payload goes
  size_t left = 0;         // payload bytes still to come

  uint8_t reply[proto::kDataReplySize] = {};
  iovec iov[2] = {};
  iovec *unsent = iov;  // the reply still to send: unsent[0..nunsent)
  int nunsent = 0;

  uint32_t interest = EPOLLIN;  // what epoll watches for
  bool runnable = false;        // in runnable_
  bool dirty = false;           // in dirty_
};

LaneServer::LaneServer(TargetPool &pool, FatalFn fatal, bool apm,
                       std::shared_ptr<TargetCounters> counters)
    : pool_(pool),
      fatal_(std::move(fatal)),
      whole_writes_(pool.traits().waits_for_device && !apm),
      apm_(apm),
      counters_(std::move(counters)) {}

LaneServer::~LaneServer() {
  stop();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::error_code LaneServer::start(std::string &why) noexcept {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    why = std::string("epoll_create1 failed: ") + strerror(errno);
    return {errno, std::generic_category()};
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    why = std::string("eventfd failed: ") + strerror(errno);
    return {errno, std::generic_category()};
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    why = std::string("epoll_ctl failed: ") + strerror(errno);
    return {errno, std::generic_category()};
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error &e) {
    why = std::string("cannot start a thread: ") + e.what();
    return e.code();
  }
  return {};
}

void LaneServer::wake() noexcept {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
}

void LaneServer::add(std::unique_ptr<ByteStream> stream, unsigned lane) noexcept {
  std::lock_guard lock(mu_);
  if (stopped_ || !thread_.joinable()) return;  // the stream closes here
  try {
    inbox_.emplace_back(std::move(stream), lane);
  } catch (const std::bad_alloc &) {
    RPMEM_LOG_ERR("lane %u dropped: out of memory", lane);
    return;
  }
  has_new_.store(true, std::memory_order_release);
  wake();
}

void LaneServer::stop() noexcept {
  if (stopping_.exchange(true)) return;
  {
    // A lane busy in a long persist answers nothing more: its client sees
    // the connection end now, not when the persist is over.
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
}

void LaneServer::run() noexcept {
  try {
    loop();
  } catch (const std::exception &e) {
    fatal_(std::string("lane server: ") + e.what());
  }
  try {
    decltype(inbox_) late;
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
      late.swap(inbox_);
      fds_.clear();
    }
    late.clear();  // handed over after the last look: closed unserved
    runnable_.clear();
    dirty_.clear();
    lanes_.clear();  // each persists its flushes and closes
  } catch (...) {
  }
}

void LaneServer::adopt_inbox(Lane *&hot) {
  decltype(inbox_) taken;
  {
    std::lock_guard lock(mu_);
    taken.swap(inbox_);
  }
  for (auto &[stream, number] : taken) {
    // A lane that came back on a new connection: the old one is closed
    // before a byte of the new one is served, so that nothing it still had
    // in flight lands after what comes on the new one. What it flushed is
    // made durable as it goes (~Lane); the client sends again whatever it
    // has not seen answered.
    const unsigned n = number;
    auto old = std::find_if(lanes_.begin(), lanes_.end(),
                            [n](const std::unique_ptr<Lane> &l) { return l->number == n; });
    if (old != lanes_.end()) {
      Lane *gone = old->get();
      if (gone == hot) hot = nullptr;
      if (gone->runnable) std::erase(runnable_, gone);
      RPMEM_LOG_INFO("lane %u: its old connection closed for the new one", n);
      drop(*gone);
    }
    auto lane = std::make_unique<Lane>(std::move(stream), number, pool_);
    if (counters_) lane->counters = counters_->lane(number);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = lane.get();
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, lane->stream->fd(), &ev) != 0) {
      RPMEM_LOG_ERR("lane %u dropped: epoll_ctl failed: %s", number, strerror(errno));
      continue;
    }
    {
      std::lock_guard lock(mu_);
      fds_.push_back(lane->stream->fd());
    }
    lane->runnable = true;  // the client may have sent already
    runnable_.push_back(lane.get());
    lanes_.push_back(std::move(lane));
  }
}

void LaneServer::loop() {
  using clock = std::chrono::steady_clock;
  epoll_event events[kMaxEvents];
  std::vector<Lane *> again;
  auto spin_until = clock::time_point{};
  ServerSpinSlots::Hold slot;  // while spinning
  SpinGauge gauge;             // whether the spins find a next request
  bool spun = false;           // spun since the last progress
  // The lane of the last request. While spinning, it is tried with a
  // receive of its own at every turn, as a raw server would wait for it,
  // and epoll only at every fourth: the next request is most often its, and
  // is then taken one call sooner.
  Lane *hot = nullptr;
  unsigned turn = 0;
  while (!stopping_.load(std::memory_order_relaxed)) {
    if (has_new_.exchange(false, std::memory_order_acquire)) adopt_inbox(hot);

    bool progress = false;
    for (Lane *lane : runnable_) {
      lane->runnable = false;
      bool moved = false;
      const Step s = step(*lane, moved);
      progress |= moved;
      if (s == Step::kEnded) {
        if (lane == hot) hot = nullptr;
        drop(*lane);
        continue;
      }
      if (moved) hot = lane;
      if (s == Step::kMore || lane->stream->has_buffered_input()) {
        lane->runnable = true;
        again.push_back(lane);
      } else {
        watch(*lane);
      }
    }
    runnable_.swap(again);
    again.clear();

    // Sleep only when nothing moved for about a round trip: the next
    // request of a busy lane comes within microseconds. But spin only while
    // a slot is free (SpinSlots: with more spinners, the spinning would take
    // the CPU from the very threads that make the requests), and while the
    // spins find a next request (SpinGauge).
    int timeout = 0;
    if (progress) {
      if (spun) gauge.spun(true);
      spun = false;
      spin_until = gauge.should_spin() ? clock::now() + kSpinBudget : clock::time_point{};
    }
    if (runnable_.empty()) {
      if (clock::now() < spin_until && slot.take()) {
        spun = true;
      } else {
        if (spun) gauge.spun(false);
        spun = false;
        spin_until = {};  // the next spin follows the next request
        slot.release();
        for (Lane *lane : dirty_) {
          lane->flush_pending();
          lane->dirty = false;
        }
        dirty_.clear();
        timeout = -1;
      }
    }
    // A turn of the spin that tries the hot lane alone.
    if (timeout == 0 && runnable_.empty() && hot && ++turn % 4 != 0) {
      hot->runnable = true;
      runnable_.push_back(hot);
      ::sched_yield();  // a peer on this CPU
      continue;
    }
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      fatal_(std::string("lane server: epoll_wait failed: ") + strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      auto *lane = static_cast<Lane *>(events[i].data.ptr);
      if (!lane) {  // taken only after epoll saw it: no wake-up is lost
        uint64_t count;
        [[maybe_unused]] auto r = ::read(wake_fd_, &count, sizeof(count));
        continue;
      }
      if (!lane->runnable) {
        lane->runnable = true;
        runnable_.push_back(lane);
      }
    }
    if (n == 0 && timeout == 0 && runnable_.empty()) ::sched_yield();  // a peer on this CPU
  }
}

void LaneServer::watch(Lane &lane) {
  const uint32_t want = lane.state == Lane::State::kReply ? EPOLLOUT : EPOLLIN;
  if (want == lane.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &lane;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, lane.stream->fd(), &ev) == 0) lane.interest = want;
}

void LaneServer::drop(Lane &lane) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, lane.stream->fd(), nullptr);
  if (lane.dirty) std::erase(dirty_, &lane);
  {
    std::lock_guard lock(mu_);
    std::erase(fds_, lane.stream->fd());
  }
  std::erase_if(lanes_, [&](const std::unique_ptr<Lane> &l) { return l.get() == &lane; });
}

LaneServer::Step LaneServer::step(Lane &lane, bool &progress) {
  auto ended = [&](const char *what, std::error_code ec) {
    if (stopping_.load()) return Step::kEnded;
    if (what)
      RPMEM_LOG_ERR("lane %u: %s: %s", lane.number, what, ec.message().c_str());
    else if (ec == std::errc::connection_reset)
      RPMEM_LOG_INFO("lane %u closed by the client", lane.number);
    else
      RPMEM_LOG_WARN("lane %u closed: %s", lane.number, ec.message().c_str());
    return Step::kEnded;
  };
  auto refuse = [&](const char *why) {
    fatal_("lane " + std::to_string(lane.number) + ": " + why);
    return Step::kEnded;
  };

  for (unsigned served = 0; served < kBurst;) {
    switch (lane.state) {
      case Lane::State::kReply: {
        if (auto ec = lane.stream->send_nowait(lane.unsent, lane.nunsent)) {
          if (!stopping_.load())
            RPMEM_LOG_INFO("lane %u: reply lost: %s", lane.number, ec.message().c_str());
          return Step::kEnded;
        }
        if (lane.nunsent > 0) return Step::kWaiting;  // the socket is full
        progress = true;
        lane.state = Lane::State::kHeader;
        break;
      }
      case Lane::State::kHeader: {
        if (lane.in.buffered() < proto::kDataRequestSize) {
          size_t got = 0;
          auto ec = lane.in.fill(got);
          progress |= got > 0;
          if (lane.in.buffered() < proto::kDataRequestSize)
            return ec ? ended(nullptr, ec) : Step::kWaiting;
        }
        auto req = proto::decode_data_request({lane.in.data(), proto::kDataRequestSize});
        lane.in.consume(proto::kDataRequestSize);
        progress = true;
        if (!req) return refuse("malformed data request");
        const bool writes = proto::carries_payload(req->op);
        if (writes || req->op == DataOp::kRead)
          if (const char *why = pool_.refusal(req->offset, req->length, writes)) return refuse(why);
        lane.req = *req;
        if (lane.counters) lane.started_ns = LaneCounters::now_ns();
        lane.dst = pool_.base() + req->offset;
        lane.left = writes ? req->length : 0;
        lane.whole = whole_writes_ && writes && req->length <= kLaneBuffer;
        lane.written.clear();
        lane.state = Lane::State::kPayload;
        [[fallthrough]];
      }
      case Lane::State::kPayload: {
        if (lane.whole && lane.left > 0) {
          if (lane.in.buffered() < lane.left) {
            size_t got = 0;
            auto ec = lane.in.fill(got);
            progress |= got > 0;
            if (lane.in.buffered() < lane.left)
              return ec ? ended("payload lost", ec) : Step::kWaiting;
          }
          lane.written = lane.req.op == DataOp::kFlush
                             ? pool_.write_posted(lane.req.offset, lane.in.data(), lane.left)
                             : pool_.write_durable(lane.req.offset, lane.in.data(), lane.left,
                                                   lane.req.op == DataOp::kDeepPersist);
          lane.in.consume(lane.left);
          lane.left = 0;
          progress = true;
        } else if (lane.left > 0) {
          size_t done = 0;
          auto ec = (lane.req.flags & proto::kDataRelaxed)
                        ? lane.in.take_direct(lane.dst, lane.left, done)
                        : lane.in.take_atomic(lane.dst, lane.left, done);
          // APM: durable as it lands, before the next piece comes.
          if (apm_ && done > 0) {
            auto ec2 = pool_.persist(static_cast<size_t>(lane.dst - pool_.base()), done, false);
            if (ec2 && !lane.written) lane.written = ec2;
          }
          lane.dst += done;
          lane.left -= done;
          progress |= done > 0;
          if (lane.left > 0) return ec ? ended("payload lost", ec) : Step::kWaiting;
        }
        ++served;
        complete(lane);  // the request is whole: answer it
        break;
      }
    }
  }
  return Step::kMore;
}

void LaneServer::complete(Lane &lane) {
  const proto::DataRequest &req = lane.req;
  proto::DataReply reply{0, req.op, 0};
  lane.state = Lane::State::kHeader;
  if (proto::carries_payload(req.op)) {
    if (req.op == DataOp::kFlush) {  // no reply: made durable later
      if (lane.counters) lane.counters->served(LaneOp::kFlush, req.length, lane.started_ns, false);
      if ((lane.whole || apm_) && lane.written && !lane.flush_error)
        lane.flush_error = lane.written;
      lane.whole = false;
      if (req.length == 0 || apm_) return;  // APM: durable already
      if (lane.flushes.full()) lane.flush_pending();
      lane.flushes.add(req.offset, req.length);
      if (!lane.dirty) {
        lane.dirty = true;
        dirty_.push_back(&lane);
      }
      return;
    }
    // APM: durable already, unless the persist is deep (pmem_deep_persist).
    std::error_code perr =
        lane.whole || (apm_ && req.op != DataOp::kDeepPersist)
            ? lane.written
            : pool_.persist(req.offset, req.length, req.op == DataOp::kDeepPersist);
    lane.whole = false;
    reply.status = static_cast<uint32_t>(perr.value());
  } else if (req.op == DataOp::kDrain) {
    lane.flush_pending();
    reply.status = static_cast<uint32_t>(lane.flush_error.value());
    lane.flush_error.clear();
  } else {  // kRead: the reply carries the bytes
    reply.length = req.length;
  }
  if (lane.counters) {
    const LaneOp op = req.op == DataOp::kDrain  ? LaneOp::kDrain
                      : req.op == DataOp::kRead ? LaneOp::kRead
                                                : LaneOp::kPersist;
    lane.counters->served(op, op == LaneOp::kDrain ? 0 : req.length, lane.started_ns,
                          reply.status != 0);
  }
  proto::encode(reply, lane.reply);
  lane.iov[0] = {lane.reply, sizeof(lane.reply)};
  lane.iov[1] = {pool_.base() + req.offset, reply.length};
  lane.unsent = lane.iov;
  lane.nunsent = reply.length ? 2 : 1;
  lane.state = Lane::State::kReply;
}

}  // namespace rpmem::transport::tcp
