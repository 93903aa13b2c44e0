// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, target side: the listener of a session's data port. One
// thread accepts, reads each connection's lane hello on its own event loop
// (epoll, a deadline per connection: no thread per connection), admits only
// lanes that prove the session secret, and hands them over to the lane
// servers (lane_server.h) that serve the requests.
//
// Each lane belongs to one lane server for its whole life (lane i to server
// i mod n), so lanes share no lock. There is one server thread per lane, but
// no more than the CPUs this process may run on: more threads than CPUs
// would only take turns. For a pool on a disk, up to 16 (kDiskThreads; at least
// one per CPU): its persists wait for the device. TargetParams::nthreads
// overrides both.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TCP_TARGET_H
#define RPMEM_COMMON_TRANSPORT_TCP_TCP_TARGET_H

#include "common/refusal_log.h"
#include "common/transport/copy_words.h"
#include "common/transport/lane_admission.h"
#include "common/transport/target_state.h"
#include "common/transport/tcp/spare_descriptor.h"
#include "common/transport/transport.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace rpmem::transport::tcp {

class ByteStream;
class LaneServer;

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
  proto::PersistMethod persist_method() const noexcept override { return params_.persist_method; }
  void start() override;
  void stop() noexcept override;

 private:
  struct Hello;  // a connection in its lane hello
  // Whether `h` has sent a whole first message: its lane hello (read or
  // waiting), or for a TLS lane its ClientHello (taken by the handshake, or
  // waiting).
  static bool whole_first_message(const Hello &h);

  void run() noexcept;
  void loop();
  void accept_ready();
  void hello_ready(Hello &h);
  // The connection's stream (cleartext, or TLS before its handshake);
  // nullptr, or why it cannot be had (fd is closed then).
  const char *open_stream(Hello &h, int fd);
  bool tls_ready(Hello &h);
  void close_hello(Hello &h);
  void hand_over(std::unique_ptr<ByteStream> stream, unsigned lane);
  // A refusal reason that lives as long as the target (RefusalLog keeps
  // pointers).
  const char *stable_reason(const char *prefix, const char *reason);
  void fatal(const std::string &why);

  TargetPool &pool_;
  TargetParams params_;
  TargetState state_;  // stop, fatal, all lanes in
  LaneAdmission admission_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;      // the listener's event loop
  SpareDescriptor spare_;  // given up to accept-and-close when out of descriptors
  uint16_t port_ = 0;

  // The listener thread's own until it is joined.
  std::vector<std::unique_ptr<Hello>> hellos_;
  std::vector<std::unique_ptr<Hello>> dropped_;  // dropped in this round of events
  std::vector<std::unique_ptr<LaneServer>> servers_;
  unsigned nservers_ = 0;                // fixed with the lane count
  std::set<std::string> refusal_texts_;  // declared before refusals_: outlives it
  RefusalLog refusals_{"data connection"};
  std::thread listener_;
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TCP_TARGET_H
