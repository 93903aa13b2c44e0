// SPDX-License-Identifier: BSD-3-Clause
// The persister of a pool on Device DAX (every part a /dev/daxN.M): a CPU
// flush makes stores durable and a deep persist adds each region's deep
// flush; a device has no page cache, so nothing is msync'ed (a device
// refuses it).
#include "common/error.h"
#include "common/log.h"
#include "common/pool_attr.h"
#include "rpmemd/persister_fsdax.h"
#include "rpmemd/pool_device_dax.h"

#include <libpmem.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace rpmemd {
namespace {

class DevdaxPersister final : public FsdaxPersister {
 public:
  DevdaxPersister(uint8_t *base, const std::vector<MappedPart> &parts) : FsdaxPersister(base, 0) {
    for (const MappedPart &p : parts)
      if (p.device && !p.device->deep_flush.empty() &&
          std::find(regions_.begin(), regions_.end(), p.device->deep_flush) == regions_.end())
        regions_.push_back(p.device->deep_flush);
  }
  // traits(), writes and a mapped page's persist: persistent memory's, as
  // FsdaxPersister's.

  // libpmem knows nothing of a mapping this daemon made itself and would
  // msync it for a deep persist. What libpmem does for its own: the stores
  // made persistent, then each region's deep flush.
  std::error_code persist(size_t offset, size_t len, bool deep) noexcept override {
    if (len == 0) return {};
    pmem_persist(base_ + offset, len);
    if (!deep) return {};
    std::error_code first;
    for (const std::string &region : regions_)
      if (auto ec = deep_flush_region(region); ec && !first) first = ec;
    return first;
  }
  std::error_code sync_all() noexcept override { return {}; }

 private:
  std::vector<std::string> regions_;  // the parts' regions' deep_flush files, each once
};

}  // namespace

std::unique_ptr<Persister> make_devdax_persister(uint8_t *base,
                                                 const std::vector<MappedPart> &parts) {
  return std::make_unique<DevdaxPersister>(base, parts);
}

}  // namespace rpmemd
