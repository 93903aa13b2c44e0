// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, target side: a listener that admits only connections
// proving the session secret, and worker threads that receive writes
// straight into the pool (or, for atomic persists, through a lane buffer
// copied with aligned 8-byte stores), make them durable and answer.
//
// Each lane belongs to one worker for its whole life (lane i to worker
// i mod n), so lanes share no lock. By default there is one worker per
// lane, but no more than the CPUs this process may run on: more threads
// than CPUs would only take turns, and each turn costs a context switch
// (TargetParams::nthreads overrides that).
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TCP_TARGET_H
#define RPMEM_COMMON_TRANSPORT_TCP_TCP_TARGET_H

#include "common/transport/transport.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rpmem::transport::tcp {

class TcpTarget final : public Target {
 public:
  // Binds and listens on params.listen_address, ephemeral port. Throws
  // SetupError when that fails.
  TcpTarget(TargetPool &pool, TargetParams params);
  ~TcpTarget() override;
  TcpTarget(const TcpTarget &) = delete;
  TcpTarget &operator=(const TcpTarget &) = delete;

  uint16_t port() const noexcept override { return port_; }
  proto::Bytes provider_data() const override { return {}; }
  void start() override;
  void stop() noexcept override;

 private:
  struct Lane;
  struct Worker;

  void accept_loop();
  void serve_connection(int fd);  // the lane hello, then the hand-over
  void hand_over(int fd, unsigned lane);
  void worker_loop(Worker &worker);
  enum class Step { kIdle, kProgress, kEnded };
  // Moves the lane on as far as it can without waiting: sends what is left
  // of the last reply, takes requests and their payloads, answers them.
  Step step(Lane &lane);
  // The request in lane.req is whole: flush, persist, drain or read, and
  // the reply to send.
  void complete(Lane &lane);
  void fatal(const std::string &why);
  bool track(int fd);  // false when stopping
  void untrack(int fd);
  void untrack_locked(int fd);  // with mu_ held

  TargetPool &pool_;
  TargetParams params_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that stops accept_loop
  uint16_t port_ = 0;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> fatal_sent_{false};
  std::atomic<unsigned> session_nlanes_{0};  // fixed by the first valid hello
  std::unique_ptr<std::atomic<bool>[]> lane_taken_;
  std::atomic<unsigned> pending_{0};  // connections not yet through the hello

  // Guards threads_, fds_, workers_, nworkers_ and the workers' inboxes;
  // never taken on the data path.
  std::mutex mu_;
  std::vector<std::thread> threads_;  // connections in their hello
  std::vector<int> fds_;
  std::vector<std::unique_ptr<Worker>> workers_;  // created as lanes come
  unsigned nworkers_ = 0;                         // fixed with the lane count
  std::thread acceptor_;
};

// Copies n bytes so that every 8-byte-aligned word of dst is written by one
// store (no word is ever seen half old, half new).
void copy_words(uint8_t *dst, const uint8_t *src, size_t n) noexcept;

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TCP_TARGET_H
