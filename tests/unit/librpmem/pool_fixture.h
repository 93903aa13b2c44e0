// SPDX-License-Identifier: BSD-3-Clause
// A pool over the fakes of fake_target.h, for tests of its rules: its local
// memory (kSize bytes), the settings it is made with, its lanes, and a wait
// for its state.
#ifndef RPMEM_TESTS_UNIT_LIBRPMEM_POOL_FIXTURE_H
#define RPMEM_TESTS_UNIT_LIBRPMEM_POOL_FIXTURE_H

#include "librpmem/errormsg.h"
#include "librpmem/pool.h"
#include "tests/unit/librpmem/fake_target.h"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <chrono>
#include <thread>

namespace rpmem::test {

using Clock = std::chrono::steady_clock;

inline constexpr size_t kSize = 1 << 20;

class PoolFixture : public ::testing::Test {
 protected:
  PoolFixture() : connector_(daemon_) {
    local_ = static_cast<uint8_t *>(
        ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    settings_.timeout = std::chrono::milliseconds(1500);
  }
  ~PoolFixture() override {
    if (pool_) pool_->close();
    pool_.reset();
    ::munmap(local_, kSize);
  }
  // Creates (or opens) the pool on `target` with `nlanes` lanes.
  int connect(bool create, const std::string &target = "host", unsigned nlanes = 2) {
    PoolArgs args;
    args.target = target;
    args.pool_set = "p.set";
    args.addr = local_;
    args.size = kSize;
    args.nlanes = nlanes;
    args.create = create;
    unsigned granted = 0;
    return Pool::connect(args, pool_, granted, nullptr, connector_, &settings_);
  }
  int create(const std::string &target = "host", unsigned nlanes = 2) {
    return connect(true, target, nlanes);
  }
  FakeLane &lane(unsigned i) { return *connector_.lanes().at(i); }
  bool wait_state(PoolState s, std::chrono::milliseconds limit = std::chrono::seconds(3)) {
    const auto end = Clock::now() + limit;
    while (pool_->state() != s && Clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return pool_->state() == s;
  }
  std::string msg() const { return errormsg(); }

  FakeDaemon daemon_;
  FakeConnector connector_;
  Settings settings_;
  uint8_t *local_ = nullptr;
  std::unique_ptr<Pool> pool_;
};

}  // namespace rpmem::test

#endif  // RPMEM_TESTS_UNIT_LIBRPMEM_POOL_FIXTURE_H
