// SPDX-License-Identifier: BSD-3-Clause
// Whether a part's memory is CXL persistent memory or an NVDIMM: the
// provider of the nvdimm bus its device sits under in sysfs ("CXL" for
// Linux's cxl_pmem, "ACPI.NFIT" for an NVDIMM; docs/cxl.md). Read once per
// part when the pool is mapped; reads sysfs only, thread-safe.
#ifndef RPMEMD_POOL_CXL_H
#define RPMEMD_POOL_CXL_H

#include <sys/types.h>

#include <string>

namespace rpmemd {

// The provider of CXL's nvdimm buses (ndbusN/provider).
inline constexpr const char *kNdProviderCxl = "CXL";

// The provider of the nvdimm bus under which the device `dev` lies: the
// real path of <sysfs_root>/dev/block/MAJ:MIN (`block`) or /dev/char/MAJ:MIN,
// walked up to its ndbusN directory, whose `provider` file says it. Empty
// when the device is on no nvdimm bus (a disk, tmpfs, a device mapper
// target) or sysfs does not say.
std::string nd_bus_provider(dev_t dev, bool block, const std::string &sysfs_root = "/sys") noexcept;

// The same for the memory behind the open file `fd`: a character device's
// own (a Device DAX, st_rdev), the block device that holds a regular file
// (a file on fsdax, st_dev). Empty for anything else.
std::string nd_bus_provider_of(int fd, const std::string &sysfs_root = "/sys") noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_POOL_CXL_H
