// SPDX-License-Identifier: BSD-3-Clause
// The persisters of a pool on CXL persistent memory (every part on an
// nvdimm bus whose provider is CXL: pool_cxl.h), through fsdax (every part
// mapped with MAP_SYNC) or Device DAX. Persistent memory's behaviour, named
// for CXL: a CPU flush makes stores durable, a NIC may write into the
// pool, APM is sound. A deep persist is the persist: the region's
// persistence domain is the memory controller (sysfs persistence_domain
// memory_controller), which the flushed stores have reached, and Linux has
// nothing deeper for it to do (its deep_flush reads 0 and is read-only);
// nothing is written to sysfs, so a deep persist fails only as a persist
// does (docs/cxl.md).
#include "rpmemd/persister_fsdax.h"

namespace rpmemd {
namespace {

// Those of persistent memory but the names.
constexpr MediumTraits kCxlFsdax = pmem_traits("cxl", "CXL persistent memory (fsdax)");
constexpr MediumTraits kCxlDevdax = pmem_traits("cxl", "CXL persistent memory (devdax)");

class CxlPersister final : public FsdaxPersister {
 public:
  // size 0: a Device DAX, which has no page cache and refuses msync.
  CxlPersister(uint8_t *base, size_t size, const MediumTraits &traits)
      : FsdaxPersister(base, size), traits_(traits) {}
  const MediumTraits &traits() const noexcept override { return traits_; }
  // Deep or not: the stores flushed to the memory controller.
  std::error_code persist(size_t offset, size_t len, bool /*deep*/) noexcept override {
    return FsdaxPersister::persist(offset, len, false);
  }
  // fsdax: msync, for the file system's own metadata (FsdaxPersister).
  std::error_code sync_all() noexcept override {
    return size_ == 0 ? std::error_code{} : FsdaxPersister::sync_all();
  }

 private:
  const MediumTraits &traits_;
};

}  // namespace

std::unique_ptr<Persister> make_cxl_fsdax_persister(uint8_t *base, size_t size) {
  return std::make_unique<CxlPersister>(base, size, kCxlFsdax);
}

std::unique_ptr<Persister> make_cxl_devdax_persister(uint8_t *base) {
  return std::make_unique<CxlPersister>(base, 0, kCxlDevdax);
}

}  // namespace rpmemd
