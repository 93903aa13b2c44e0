// SPDX-License-Identifier: BSD-3-Clause
// Device DAX parts of a pool set (/dev/daxX.Y, as PMDK allowed): the whole
// device is the part, its size and alignment come from sysfs, nothing is
// created or unlinked. Thread-safe (reads sysfs only).
#ifndef RPMEMD_POOL_DEVICE_DAX_H
#define RPMEMD_POOL_DEVICE_DAX_H

#include "rpmemd/poolset.h"

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

namespace rpmemd {

// A deep flush of the region whose deep_flush file is `path` (see
// DeviceDax), as libpmem's pmem_deep_persist() does for the devices it maps
// itself: EIO with a log line when the write fails.
std::error_code deep_flush_region(const std::string &path) noexcept;

// The sysfs directory of device `dev`: <sysfs_root>/dev/block/MAJ:MIN
// (`block`) or <sysfs_root>/dev/char/MAJ:MIN.
std::string sysfs_dev_dir(dev_t dev, bool block, const std::string &sysfs_root);
// The nearest directory above the real path of `dir` (a device's sysfs
// directory) whose name `is` says it is (regionN, ndbusN); empty when none.
std::string sysfs_ancestor(const std::string &dir, bool (*is)(const std::string &name));

// The device DAX at `path`, or nullopt when `path` is not one (a regular
// file, a missing path). `sysfs_root`: "/sys", for tests.
std::optional<DeviceDax> device_dax(const std::string &path,
                                    const std::string &sysfs_root = "/sys") noexcept;

// Decides, once for the set, what each part is (PoolSetPart::device), by
// PMDK's rules: the size AUTO (PoolSetPart::size 0) becomes the device's
// size and is allowed only on a device DAX; every part is a device DAX or
// none is; several devices need an alignment of 4 KiB unless SINGLEHDR or
// NOHDRS (the later parts are then mapped from their first byte). EINVAL
// with a log line otherwise.
std::error_code resolve_device_dax(PoolSet &set, const std::string &sysfs_root = "/sys") noexcept;

// Removes part `path` (rpmemd --remove, a failed create, a close with the
// remove flag): a device DAX (`device`) is never unlinked, its pool header
// is zeroed instead; a file is unlinked. With `lock` the part is first
// locked as an open pool would hold it (EWOULDBLOCK when one does), as
// PMDK's util_unlink_flock.
std::error_code remove_part(const std::string &path, const std::optional<DeviceDax> &device,
                            bool lock) noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_POOL_DEVICE_DAX_H
