// SPDX-License-Identifier: BSD-3-Clause
// FsdaxPersister: persistent memory through a file system with DAX
// (persister_fsdax.cc), which the Device DAX persister extends: stores are
// made durable by a CPU flush, whole-word stores for writes.
#ifndef RPMEMD_PERSISTER_FSDAX_H
#define RPMEMD_PERSISTER_FSDAX_H

#include "rpmemd/persister.h"

namespace rpmemd {

// The traits of persistent memory, under the names of a medium that is
// persistent memory (fsdax, and CXL memory): a CPU flush makes stores
// durable, a NIC may write into the pool, APM is sound, and visible costs
// what persistent costs (a pmem_persist is a few cache-line flushes).
constexpr MediumTraits pmem_traits(const char *name, const char *noun) noexcept {
  return {
      .name = name,
      .noun = noun,
      .description = noun,
      .flush = "pmem_persist",
      .nic_writes = true,
      .waits_for_device = false,
      .apm_sound = true,
      .visible_cheaper = false,
  };
}

class FsdaxPersister : public Persister {
 public:
  FsdaxPersister(uint8_t *base, size_t size) : base_(base), size_(size) {}
  const MediumTraits &traits() const noexcept override;
  std::error_code persist(size_t offset, size_t len, bool deep) noexcept override;
  // Whole-word stores, then persist().
  std::error_code write_durable(size_t offset, const uint8_t *src, size_t len,
                                bool deep) noexcept override;
  std::error_code write_posted(size_t offset, const uint8_t *src, size_t len) noexcept override;
  std::error_code persist_mapped(void *addr, size_t len) noexcept override;
  // msync: what a pool forced to count as pmem on a disk needs, and the
  // file system's own metadata.
  std::error_code sync_all() noexcept override;

 protected:
  uint8_t *const base_;
  const size_t size_;
};

}  // namespace rpmemd

#endif  // RPMEMD_PERSISTER_FSDAX_H
