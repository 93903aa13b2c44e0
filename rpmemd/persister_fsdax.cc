// SPDX-License-Identifier: BSD-3-Clause
// The persister of a pool on persistent memory through a file system with
// DAX (every part mapped with MAP_SYNC, or pmem_is_pmem(), which
// PMEM_IS_PMEM_FORCE sets): a CPU flush makes stores durable, a NIC may
// write into the pool, and APM is sound.
#include "rpmemd/persister_fsdax.h"

#include "common/error.h"
#include "common/log.h"
#include "common/transport/copy_words.h"

#include <libpmem.h>

#include <sys/mman.h>

namespace rpmemd {
namespace {

constexpr MediumTraits kFsdax = pmem_traits("pmem", "persistent memory");

}  // namespace

const MediumTraits &FsdaxPersister::traits() const noexcept { return kFsdax; }

std::error_code FsdaxPersister::persist(size_t offset, size_t len, bool deep) noexcept {
  if (len == 0) return {};
  if (!deep) {
    pmem_persist(base_ + offset, len);
    return {};
  }
  return pmem_deep_persist(base_ + offset, len) == 0 ? std::error_code{} : rpmem::errc(EIO);
}

std::error_code FsdaxPersister::write_durable(size_t offset, const uint8_t *src, size_t len,
                                              bool deep) noexcept {
  rpmem::transport::copy_words(base_ + offset, src, len);
  return persist(offset, len, deep);
}

std::error_code FsdaxPersister::write_posted(size_t offset, const uint8_t *src,
                                             size_t len) noexcept {
  rpmem::transport::copy_words(base_ + offset, src, len);
  return {};
}

std::error_code FsdaxPersister::persist_mapped(void *addr, size_t len) noexcept {
  pmem_persist(addr, len);
  return {};
}

std::error_code FsdaxPersister::sync_all() noexcept {
  if (::msync(base_, size_, MS_SYNC) == 0) return {};
  auto ec = rpmem::last_errc();
  RPMEM_LOG_ERR("msync of the pool on close failed: %s", ec.message().c_str());
  return ec;
}

std::unique_ptr<Persister> make_fsdax_persister(uint8_t *base, size_t size) {
  return std::make_unique<FsdaxPersister>(base, size);
}

}  // namespace rpmemd
