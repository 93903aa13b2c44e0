// SPDX-License-Identifier: BSD-3-Clause
// The persister of a pool in RAM (every part on tmpfs, ramfs or hugetlbfs):
// nothing lies below its pages, so durable means as durable as the target's
// memory, a persist waits for nothing, and a NIC may write into it.
#include "common/transport/copy_words.h"
#include "rpmemd/persister.h"

namespace rpmemd {
namespace {

constexpr MediumTraits kRam{
    .name = "ram",
    .noun = "a file in RAM",
    .description = "a file in RAM (tmpfs): durable as RAM is",
    .flush = "pmem_msync",
    .nic_writes = true,
    .waits_for_device = false,
    .apm_sound = false,
    .visible_cheaper = false,
};

class RamPersister final : public Persister {
 public:
  explicit RamPersister(uint8_t *base) : base_(base) {}
  const MediumTraits &traits() const noexcept override { return kRam; }
  // An msync here would write nothing back and only cost the call.
  std::error_code persist(size_t, size_t, bool) noexcept override { return {}; }
  std::error_code write_durable(size_t offset, const uint8_t *src, size_t len,
                                bool) noexcept override {
    return write_posted(offset, src, len);
  }
  std::error_code write_posted(size_t offset, const uint8_t *src, size_t len) noexcept override {
    rpmem::transport::copy_words(base_ + offset, src, len);
    return {};
  }
  std::error_code persist_mapped(void *, size_t) noexcept override { return {}; }
  std::error_code sync_all() noexcept override { return {}; }

 private:
  uint8_t *base_;
};

}  // namespace

std::unique_ptr<Persister> make_ram_persister(uint8_t *base) {
  return std::make_unique<RamPersister>(base);
}

}  // namespace rpmemd
