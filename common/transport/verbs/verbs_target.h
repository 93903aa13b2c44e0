// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, target side: an rdma_cm listener on the address from
// SSH_CONNECTION, a memory region registered for remote write and read
// (address, rkey and persist method go back in provider_data), and one
// thread per lane that sleeps on its completion channel. Connect requests
// must carry the session secret (checked in constant time) and a free lane
// index, or they are rejected before any queue pair exists. A lane that
// comes back (a higher epoch, protocol minor >= kMinorVerbsResume) takes
// its index's place: the old queue pair is disconnected and its thread
// joined first; an epoch it had already is refused (replayed or late).
//
// Where RDMA WRITEs land depends on the pool:
//  - memory a NIC may write into and that registers (devdax pmem, a file in
//    RAM: tmpfs, hugetlbfs): the pool mapping itself, the direct path;
//  - memory it must not or cannot (a file in the page cache: a NIC writes
//    around the page tables, so the pages it wrote would never be written
//    back; fsdax pmem: Linux refuses long-term pins of its pages): one
//    registered window per lane (TargetParams::verbs_window bytes), the
//    bounded path. A drain names the pool ranges of what the lane wrote into
//    its window, in order; this CPU copies them into the pool (whole-word
//    stores, or a durable write of the file) and makes them durable before
//    it answers, so the client may reuse the window. rpmem_read goes
//    through the window too. The daemon's memory is then lanes x window,
//    whatever the pool's size. Only clients of protocol minor >=
//    kMinorBounded know this path; the constructor refuses older ones.
// GPSPM requests (SENDs) are served here: inline data copied with aligned
// 8-byte stores, then TargetPool::persist; APM reads never reach this CPU.
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_H

#include "common/transport/lane_admission.h"
#include "common/transport/target_state.h"
#include "common/transport/transport.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_wire.h"

#include <sys/mman.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace rpmem::transport::verbs {

class VerbsTarget final : public Target {
 public:
  // Throws SetupError: no device, a loopback listen address (no RDMA
  // there), memlock too low, registration failures, or
  // EPROTONOSUPPORT: a pool of the bounded path and a client that predates it.
  VerbsTarget(TargetPool &pool, TargetParams params);
  ~VerbsTarget() override;
  VerbsTarget(const VerbsTarget &) = delete;
  VerbsTarget &operator=(const VerbsTarget &) = delete;

  uint16_t port() const noexcept override { return port_; }
  proto::Bytes provider_data() const override { return provider_data_; }
  proto::PersistMethod persist_method() const noexcept override { return method_; }
  std::string data_path() const override { return data_path_; }
  void start() override;
  void stop() noexcept override;

  struct Lane;

 private:
  void accept_loop();
  void on_connect_request(rdma_cm_id *id, const std::vector<uint8_t> &private_data);
  // A lane that came back: its old connection is closed and its thread
  // joined before the new one is accepted, so that nothing of the old
  // queue pair lands or is served after the new one's first request.
  void retire(unsigned index);
  std::string set_up(Lane &lane, rdma_cm_id *id);  // verbs_target.cc says what
  void lane_loop(Lane &lane);
  bool sleep(Lane &lane, bool &armed);  // on the lane's channels; false: it ended
  // Serves one received message; false ends the lane.
  bool serve(Lane &lane, uint32_t byte_len);
  // Direct path: makes the `n` pool ranges (16 bytes each, at `ranges`)
  // the lane's RDMA writes landed in durable (visible: visible); false:
  // a range outside the pool (logged, the session ends).
  bool drain_ranges(Lane &lane, const uint8_t *ranges, uint64_t n, bool visible,
                    std::error_code &status);
  // Bounded path: copies what the lane wrote into its window for `n` pool
  // ranges (16 bytes each, at `ranges`), one after the other from the
  // window's start, into the pool and makes them durable; false: the ranges
  // do not fit the window or the pool (logged, the session ends).
  bool drain_window(Lane &lane, const uint8_t *ranges, uint64_t n, bool visible,
                    std::error_code &status);
  // The direct path or the bounded one, with what the client needs to know
  // of it in `info`.
  void land(ProviderInfo &info);
  // Direct path: `why` names how the pool cannot be registered (empty: it
  // was, into pool_mr_).
  void register_pool(std::string &why);
  void fatal(const std::string &why);

  TargetPool &pool_;
  TargetParams params_;
  TargetState state_;  // stop, fatal, all lanes in
  EventChannelPtr channel_;
  CmIdPtr listen_id_;
  PdPtr pd_;
  struct Unmap {
    size_t size;
    void operator()(uint8_t *p) const noexcept { ::munmap(p, size); }
  };
  using Windows = std::unique_ptr<uint8_t, Unmap>;
  Windows windows_{nullptr, Unmap{0}};  // bounded path: max_lanes windows
  size_t window_ = 0;                   // bytes of each lane's window (bounded path)
  MrPtr pool_mr_;                       // the pool mapping, or windows_
  ibv_context *ctx_ = nullptr;
  uint16_t port_ = 0;
  proto::Bytes provider_data_;
  proto::PersistMethod method_ = proto::PersistMethod::kGpspm;
  std::string data_path_;

  LaneAdmission admission_;

  // Each lane index's thread and lane, the one of its latest epoch (the
  // acceptor replaces them; stop() joins them once the acceptor is gone).
  struct Slot {
    std::thread thread;
    std::shared_ptr<Lane> lane;
  };
  std::mutex mu_;  // guards slots_ (never touched on the data path)
  std::vector<Slot> slots_;
  std::thread acceptor_;
};

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_H
