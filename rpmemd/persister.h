// SPDX-License-Identifier: BSD-3-Clause
// The persisters of rpmemd, one per medium (persister_<medium>.cc), and
// choose_persister(), the only place that tells media apart: from the parts
// of a pool set as they are mapped, once, when the pool is opened.
//
// Adding a medium: a persister_<medium>.cc with its traits and calls, and a
// line in choose_persister() (docs/design.md lists what else it adds).
#ifndef RPMEMD_PERSISTER_H
#define RPMEMD_PERSISTER_H

#include "common/error.h"
#include "common/transport/persister.h"
#include "rpmemd/poolset.h"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rpmemd {

using rpmem::transport::MediumTraits;
using rpmem::transport::Persister;

// One part file of a pool set, opened, locked and mapped into the pool's
// contiguous range.
struct MappedPart {
  std::string path;
  uint64_t size = 0;  // configured (== file) size
  int fd = -1;
  bool created = false;   // created by this open (removed when it fails)
  bool map_sync = false;  // mapped with MAP_SYNC
  bool in_ram = false;    // on tmpfs, ramfs or hugetlbfs
  size_t map_start = 0;   // pool offset of the first mapped byte
  size_t map_len = 0;     // bytes mapped
  off_t file_off = 0;     // file offset of the first mapped byte
  // What the part is (PoolSetPart::device, decided when the set was
  // loaded): a device DAX, or (nullopt) a file.
  std::optional<DeviceDax> device;
  // Where it is mapped, of a part on fsdax or a device DAX: the provider of
  // the nvdimm bus its memory is on (pool_cxl.h: "CXL", "ACPI.NFIT"); empty
  // when none, and for the other parts.
  std::string nd_provider;
};

// The persister of the pool mapped at [base, +size) from `parts`, which
// must outlive it:
//   every part a device DAX on CXL          -> CXL persistent memory (devdax)
//   every part a device DAX                 -> Device DAX
//   every part mapped with MAP_SYNC and on CXL -> CXL persistent memory (fsdax)
//   every part mapped with MAP_SYNC, or pmem_is_pmem() (PMEM_IS_PMEM_FORCE)
//                                           -> fsdax persistent memory
//   every part in RAM (tmpfs, ramfs, hugetlbfs) -> RAM
//   anything else (one part on a disk is enough) -> a file in the page cache
// Some parts device DAX and others not: EINVAL, with why (resolve_device_dax()
// refuses such a set before it is mapped).
rpmem::Result<std::unique_ptr<Persister>> choose_persister(uint8_t *base, size_t size,
                                                           const std::vector<MappedPart> &parts);

// One per medium (persister_<medium>.cc).
std::unique_ptr<Persister> make_ram_persister(uint8_t *base);
std::unique_ptr<Persister> make_page_cache_persister(uint8_t *base, size_t size,
                                                     const std::vector<MappedPart> &parts);
std::unique_ptr<Persister> make_fsdax_persister(uint8_t *base, size_t size);
std::unique_ptr<Persister> make_devdax_persister(uint8_t *base,
                                                 const std::vector<MappedPart> &parts);
std::unique_ptr<Persister> make_cxl_fsdax_persister(uint8_t *base, size_t size);
std::unique_ptr<Persister> make_cxl_devdax_persister(uint8_t *base);

}  // namespace rpmemd

#endif  // RPMEMD_PERSISTER_H
