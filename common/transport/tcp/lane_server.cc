// SPDX-License-Identifier: BSD-3-Clause
// The tcp lane server's thread: its lanes handed over, its epoll loop with
// the spin before a sleep, its start and stop (the requests themselves:
// lane_server_step.cc).
#include "common/transport/tcp/lane_server.h"

#include "common/log.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/lane_server_lane.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace rpmem::transport::tcp {

namespace {

constexpr int kMaxEvents = 64;
// At most one lane server per two CPUs spins for the next request.
using ServerSpinSlots = SpinSlots<LaneServer>;

}  // namespace

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

    const bool progress = serve_runnable(hot, again);

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
          lane->flush_idle();
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
    if (!wait_events(timeout)) return;
  }
}

// Steps every runnable lane once; those that can go on without waiting stay
// runnable, the others wait for epoll. True when any moved.
bool LaneServer::serve_runnable(Lane *&hot, std::vector<Lane *> &again) {
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
  return progress;
}

// Waits up to `timeout` ms (0: a look, -1: until something comes) and makes
// the lanes epoll reports runnable. False when the server cannot go on.
bool LaneServer::wait_events(int timeout) {
  epoll_event events[kMaxEvents];
  const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, timeout);
  if (n < 0) {
    if (errno == EINTR) return true;
    fatal_(std::string("lane server: epoll_wait failed: ") + strerror(errno));
    return false;
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
  return true;
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

}  // namespace rpmem::transport::tcp
