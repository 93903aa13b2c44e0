// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, target side: a listener that admits only connections
// proving the session secret, and one thread per lane that receives writes
// straight into the pool (or, for atomic persists, through a lane buffer
// copied with aligned 8-byte stores), makes them durable and answers.
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
  void accept_loop();
  void serve_connection(int fd);  // the lane hello, then the lane loop
  void lane_loop(int fd, unsigned lane);
  void fatal(const std::string &why);
  bool track(int fd);  // false when stopping
  void untrack(int fd);

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

  std::mutex mu_;  // guards threads_ and fds_ (never touched on the data path)
  std::vector<std::thread> threads_;
  std::vector<int> fds_;
  std::thread acceptor_;
};

// Copies n bytes so that every 8-byte-aligned word of dst is written by one
// store (no word is ever seen half old, half new).
void copy_words(uint8_t *dst, const uint8_t *src, size_t n) noexcept;

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TCP_TARGET_H
