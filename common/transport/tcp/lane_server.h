// SPDX-License-Identifier: BSD-3-Clause
// The tcp lane server: one thread serving any number of lanes of one
// session. Each lane is a request state machine over a ByteStream: it takes
// a request header, receives the payload straight into the pool (or, for
// atomic writes, through its buffer with whole-word stores), makes it
// durable and sends the reply.
//
// Readiness comes from epoll, so the work per request does not depend on
// how many lanes are open: only lanes with input, or a reply to finish, are
// looked at. When the last request came moments ago, the thread polls
// without sleeping for about a round trip (kSpinBudget) before it makes the
// posted flushes durable and sleeps: the lane of that request with a
// receive of its own, and epoll every fourth turn. It spins only while such
// spins find a next request (SpinGauge).
#ifndef RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_H
#define RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_H

#include "common/transport/tcp/byte_stream.h"
#include "common/transport/transport.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace rpmem::transport::tcp {

class LaneServer {
 public:
  using FatalFn = std::function<void(const std::string &why)>;

  // `fatal` is called from the server's thread when a lane sees malformed
  // input or the server cannot go on. `apm` (a pool on pmem, --persist-apm):
  // every byte is made durable as it lands in the pool, so that a persist or
  // a drain only orders (the Appliance Persistency Method over tcp).
  // `counters` (null: none) get what each lane serves, by its number.
  LaneServer(TargetPool &pool, FatalFn fatal, bool apm = false,
             std::shared_ptr<TargetCounters> counters = nullptr);
  ~LaneServer();  // stop()
  LaneServer(const LaneServer &) = delete;
  LaneServer &operator=(const LaneServer &) = delete;

  // Creates the epoll set and the thread; an error (with its reason in
  // `why`) when either cannot be had. Called once.
  std::error_code start(std::string &why) noexcept;
  // Hands over an admitted lane; from any thread. After stop() the stream
  // is closed at once.
  void add(std::unique_ptr<ByteStream> stream, unsigned lane) noexcept;
  // Ends the thread: every lane's posted flushes are made durable and its
  // connection closed. Idempotent.
  void stop() noexcept;

 private:
  struct Lane;
  enum class Step { kWaiting, kMore, kEnded };

  void run() noexcept;
  void loop();
  // Takes the lanes handed over; one that came back replaces its old
  // connection (`hot` is cleared when it was that one).
  void adopt_inbox(Lane *&hot);
  // Moves the lane on as far as it can without waiting; `progress` is set
  // when it took or sent anything.
  Step step(Lane &lane, bool &progress);
  Step send_reply(Lane &lane, bool &progress);
  Step take_header(Lane &lane, bool &progress);
  Step take_payload(Lane &lane, bool &progress);  // kMore: the payload is whole
  void complete(Lane &lane);
  Step ended(Lane &lane, const char *what, std::error_code ec);  // logs why
  Step refuse(Lane &lane, const char *why);                      // malformed: ends the session
  // Steps the runnable lanes once (loop()); true when any moved.
  bool serve_runnable(Lane *&hot, std::vector<Lane *> &again);
  bool wait_events(int timeout);  // epoll; false when the server cannot go on
  void watch(Lane &lane);         // epoll interest from the lane's state
  void drop(Lane &lane);
  void wake() noexcept;

  TargetPool &pool_;
  FatalFn fatal_;
  // The medium takes whole writes (traits().waits_for_device) and the
  // method is not APM: durable and posted payloads go in through
  // write_durable/write_posted (visible ones are stores, as everywhere).
  const bool whole_writes_;
  const bool apm_;  // writes durable as they land (pmem)
  const std::shared_ptr<TargetCounters> counters_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  std::mutex mu_;  // guards inbox_, fds_ and stopped_; never taken per request
  std::vector<std::pair<std::unique_ptr<ByteStream>, unsigned>> inbox_;
  std::vector<int> fds_;  // of the lanes being served: stop() shuts them down
  bool stopped_ = false;  // the thread took its last look at the inbox
  std::atomic<bool> has_new_{false};

  // The thread's own: every lane, the ones to step again without waiting,
  // and the ones with posted flushes not yet durable.
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<Lane *> runnable_;
  std::vector<Lane *> dirty_;
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_H
