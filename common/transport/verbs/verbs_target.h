// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, target side: an rdma_cm listener on the address from
// SSH_CONNECTION, a memory region registered for remote write and read
// (address, rkey and persist method go back in provider_data), and one
// thread per lane that sleeps on its completion channel. Connect requests
// must carry the session secret (checked in constant time) and a free lane
// index, or they are rejected before any queue pair exists.
//
// Where RDMA WRITEs land depends on the pool:
//  - persistent memory (TargetPool::is_pmem): the pool mapping itself;
//  - a file in the page cache: a staging buffer of the pool's size. A NIC
//    writes around the page tables, so pages it wrote into a file mapping
//    are never marked dirty and msync would not write them back. The
//    staging buffer starts as a copy of the pool; when a range is persisted
//    or drained, this CPU copies it into the pool (whole-word stores) and
//    then makes it durable, so the kernel sees every byte as a write.
// GPSPM requests (SENDs) are served here: inline data copied with aligned
// 8-byte stores, then TargetPool::persist; APM reads never reach this CPU.
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_H

#include "common/transport/lane_admission.h"
#include "common/transport/target_state.h"
#include "common/transport/transport.h"
#include "common/transport/verbs/verbs_rdma.h"

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
  // there), memlock too low, or registration failures.
  VerbsTarget(TargetPool &pool, TargetParams params);
  ~VerbsTarget() override;
  VerbsTarget(const VerbsTarget &) = delete;
  VerbsTarget &operator=(const VerbsTarget &) = delete;

  uint16_t port() const noexcept override { return port_; }
  proto::Bytes provider_data() const override { return provider_data_; }
  void start() override;
  void stop() noexcept override;
  void pool_changed(size_t offset, size_t length) noexcept override;

  struct Lane;

 private:
  void accept_loop();
  void on_connect_request(rdma_cm_id *id, const std::vector<uint8_t> &private_data);
  void lane_loop(Lane &lane);
  // Serves one received message; false ends the lane.
  bool serve(Lane &lane, uint32_t byte_len);
  // Makes [offset, +length), written by RDMA, durable in the pool.
  std::error_code persist_written(uint64_t offset, uint64_t length, bool deep) noexcept;
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
  using Staging = std::unique_ptr<uint8_t, Unmap>;
  Staging staging_{nullptr, Unmap{0}};  // page-cache pools: where RDMA WRITEs land
  MrPtr pool_mr_;                       // the pool mapping, or staging_
  ibv_context *ctx_ = nullptr;
  uint16_t port_ = 0;
  proto::Bytes provider_data_;

  LaneAdmission admission_;

  std::mutex mu_;  // guards threads_ (never touched on the data path)
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_TARGET_H
