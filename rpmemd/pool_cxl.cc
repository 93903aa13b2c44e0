// SPDX-License-Identifier: BSD-3-Clause
// The nvdimm bus of a part's memory, from sysfs (pool_cxl.h): how rpmemd
// tells CXL persistent memory from an NVDIMM.
#include "rpmemd/pool_cxl.h"

#include "rpmemd/pool_device_dax.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace rpmemd {
namespace {

// True for "ndbus" followed by its number.
bool is_nd_bus(const std::string &name) {
  if (name.size() <= 5 || name.compare(0, 5, "ndbus") != 0) return false;
  return name.find_first_not_of("0123456789", 5) == std::string::npos;
}

}  // namespace

std::string nd_bus_provider(dev_t dev, bool block, const std::string &sysfs_root) noexcept try {
  // .../ndbusN/regionM/pfnM.0/block/pmemM, .../ndbusN/regionM/daxM.0/daxM.0
  const std::string bus = sysfs_ancestor(sysfs_dev_dir(dev, block, sysfs_root), is_nd_bus);
  if (bus.empty()) return {};
  std::ifstream in(bus + "/provider");
  std::string provider;
  if (!std::getline(in, provider)) return {};
  return provider;
} catch (...) {
  return {};
}

std::string nd_bus_provider_of(int fd, const std::string &sysfs_root) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return {};
  if (S_ISCHR(st.st_mode)) return nd_bus_provider(st.st_rdev, false, sysfs_root);
  if (S_ISREG(st.st_mode)) return nd_bus_provider(st.st_dev, true, sysfs_root);
  return {};
}

}  // namespace rpmemd
