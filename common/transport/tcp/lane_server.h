// SPDX-License-Identifier: BSD-3-Clause
// The tcp lane server: one thread serving any number of lanes, of one
// session or of several (SharedLaneServers). Each lane is a request state
// machine over a ByteStream: it takes a request header, receives the
// payload straight into its owner's pool (or, for atomic writes, through
// its buffer with whole-word stores), makes it durable and sends the reply.
//
// Readiness comes from epoll, so the work per request does not depend on
// how many lanes are open: only lanes with input, or a reply to finish, are
// looked at. When the last request came moments ago, the thread polls
// without sleeping for about a round trip (kSpinBudget) before it makes the
// posted flushes durable and sleeps: the lane of that request with a
// receive of its own, and epoll every fourth turn. It spins only while such
// spins find a next request (SpinGauge). Serving the lanes of many sessions
// on one thread per CPU, rather than a thread per session, lets one wake-up
// serve every lane that has a request: with a crowd of clients the server
// rarely sleeps, and the CPUs are not spent switching between threads.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_H
#define RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_H

#include "common/transport/tcp/byte_stream.h"
#include "common/transport/transport.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace rpmem::transport::tcp {

// CPUs this process may run on (its affinity mask, which cpusets and
// taskset narrow), at least 1.
unsigned usable_cpus() noexcept;

// The target a lane belongs to: its pool, where its fatal errors go, and
// whether it is stopping. It outlives its lanes: LaneServer::remove()
// returns only when they are gone.
struct LaneOwner {
  using FatalFn = std::function<void(const std::string &why)>;

  // `fatal` is called from a server's thread when a lane of this owner
  // sees malformed input, or the server cannot go on.
  LaneOwner(TargetPool &pool_, FatalFn fatal_)
      : pool(pool_), fatal(std::move(fatal_)), disk(pool_.persist_waits_for_device()) {}
  LaneOwner(const LaneOwner &) = delete;
  LaneOwner &operator=(const LaneOwner &) = delete;

  TargetPool &pool;
  const FatalFn fatal;
  const bool disk;  // pool.persist_waits_for_device(): persists go through write_durable
  std::atomic<bool> stopping{false};
  // A server's list of owners to remove, and whether it removed this one
  // (both guarded by that server's lock).
  LaneOwner *next_removal = nullptr;
  bool removal_done = false;
};

class LaneServer {
 public:
  LaneServer();
  ~LaneServer();  // stop()
  LaneServer(const LaneServer &) = delete;
  LaneServer &operator=(const LaneServer &) = delete;

  // Creates the epoll set and the thread; an error (with its reason in
  // `why`) when either cannot be had. Called once.
  std::error_code start(std::string &why) noexcept;
  // Hands over an admitted lane of `owner`; from any thread. After stop(),
  // or once the server has failed, the stream is closed at once.
  void add(LaneOwner &owner, std::unique_ptr<ByteStream> stream, unsigned lane) noexcept;
  // Ends the lanes of `owner`: each one's posted flushes are made durable
  // and its connection closed. Returns when they are gone; the owner hands
  // over no more lanes to this server. From any thread but the server's.
  void remove(LaneOwner &owner) noexcept;
  // Ends the thread: every lane's posted flushes are made durable and its
  // connection closed. Idempotent.
  void stop() noexcept;

  // Whether the thread runs (started, and neither stopped nor failed).
  bool serving() const noexcept { return running_.load(std::memory_order_relaxed); }
  // Lanes handed over and not yet ended (for balancing lanes over servers).
  unsigned load() const noexcept { return load_.load(std::memory_order_relaxed); }

 private:
  struct Lane;
  enum class Step { kWaiting, kMore, kEnded };

  void run() noexcept;
  void loop();
  // Takes the lanes handed over and ends those of the owners to remove.
  void adopt_inbox();
  void fatal_all(const std::string &why) noexcept;
  // Moves the lane on as far as it can without waiting; `progress` is set
  // when it took or sent anything.
  Step step(Lane &lane, bool &progress);
  void complete(Lane &lane);
  void watch(Lane &lane);  // epoll interest from the lane's state
  void drop(Lane &lane);
  void wake() noexcept;

  struct Handed {
    LaneOwner *owner;
    std::unique_ptr<ByteStream> stream;
    unsigned lane;
  };

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> running_{false};
  std::atomic<unsigned> load_{0};
  std::thread thread_;

  // Guards inbox_, fds_, removals_, stopped_ and finished_; never taken
  // per request.
  std::mutex mu_;
  std::condition_variable removed_;  // a removal was done, or finished_
  std::vector<Handed> inbox_;
  // The connections of the lanes being served, and their owners: stop()
  // and remove() shut them down.
  std::vector<std::pair<int, LaneOwner *>> fds_;
  LaneOwner *removals_ = nullptr;  // owners to remove, through next_removal
  bool stopped_ = false;           // the thread took its last look at the inbox
  bool finished_ = false;          // and its lanes are gone
  std::atomic<bool> has_new_{false};

  // The thread's own: every lane, the ones to step again without waiting,
  // the ones with posted flushes not yet durable, and the lane of the last
  // request (tried alone while spinning).
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<Lane *> runnable_;
  std::vector<Lane *> dirty_;
  Lane *hot_ = nullptr;
};

// The lane servers that the pools of this process which are not on a disk
// share: one per CPU the process may run on, each started with its first
// lane, all stopped when the last target holding them lets go. A target
// hands each lane to the server with the fewest lanes. A pool on a disk
// gets servers of its own instead: its persists wait for the device, and
// would hold up every other session's lanes.
class SharedLaneServers {
 public:
  // The servers, shared with every other target that holds them.
  static std::shared_ptr<SharedLaneServers> get();
  ~SharedLaneServers();  // stops every server

  SharedLaneServers(const SharedLaneServers &) = delete;
  SharedLaneServers &operator=(const SharedLaneServers &) = delete;

  // How many servers there may be.
  unsigned size() const noexcept { return static_cast<unsigned>(servers_.size()); }
  // The serving server with the fewest lanes, started if need be; nullptr
  // (with the reason in `why`) when none can serve.
  LaneServer *pick(std::string &why) noexcept;

 private:
  explicit SharedLaneServers(unsigned n);

  std::mutex mu_;  // guards starting servers
  std::vector<std::unique_ptr<LaneServer>> servers_;
  std::vector<bool> tried_;  // start() was called (it is called once)
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_H
