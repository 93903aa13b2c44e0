// SPDX-License-Identifier: BSD-3-Clause
// SpinGauge, SpinSlots, WaitSpin: whether, and how long, a data-path wait spins first.
#include "common/transport/spin_gauge.h"

#include <sched.h>

#include <thread>

namespace rpmem::transport {

unsigned usable_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0)
    return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace rpmem::transport
