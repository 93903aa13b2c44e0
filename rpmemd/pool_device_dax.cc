// SPDX-License-Identifier: BSD-3-Clause
// Device DAX parts: what sysfs says of them.
#include "rpmemd/pool_device_dax.h"

#include "common/error.h"
#include "common/log.h"
#include "common/pool_attr.h"

#include <libpmem.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace rpmemd {

namespace {

using rpmem::errc;
using rpmem::last_errc;

std::optional<uint64_t> read_number(const std::string &file) {
  std::ifstream in(file);
  uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

std::string sysfs_dev_dir(dev_t dev, bool block, const std::string &sysfs_root) {
  return sysfs_root + (block ? "/dev/block/" : "/dev/char/") + std::to_string(major(dev)) + ":" +
         std::to_string(minor(dev));
}

std::string sysfs_ancestor(const std::string &dir, bool (*is)(const std::string &name)) {
  char *real = ::realpath(dir.c_str(), nullptr);
  if (!real) return {};
  std::string up(real);
  std::free(real);
  for (size_t slash; (slash = up.rfind('/')) != std::string::npos && slash > 0; up.resize(slash))
    if (is(up.substr(slash + 1))) return up;
  return {};
}

std::optional<DeviceDax> device_dax(const std::string &path, const std::string &sysfs_root) noexcept
    try {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return std::nullopt;
  const std::string dev = sysfs_dev_dir(st.st_rdev, false, sysfs_root);
  char *subsystem = ::realpath((dev + "/subsystem").c_str(), nullptr);
  if (!subsystem) return std::nullopt;
  const std::string s(subsystem);
  std::free(subsystem);
  if (s != sysfs_root + "/bus/dax" && s != sysfs_root + "/class/dax") return std::nullopt;
  DeviceDax d;
  auto size = read_number(dev + "/size");
  auto align = read_number(dev + "/align");
  if (!align) align = read_number(dev + "/device/align");  // older kernels
  if (!size || !align || *align == 0) return std::nullopt;
  d.size = *size;
  d.align = *align;
  // The device sits below its region in sysfs: .../ndbusN/regionM/daxM.K/...
  const std::string region = sysfs_ancestor(
      dev, [](const std::string &name) { return name.compare(0, 6, "region") == 0; });
  if (!region.empty() && ::access((region + "/deep_flush").c_str(), F_OK) == 0)
    d.deep_flush = region + "/deep_flush";
  return d;
} catch (...) {
  return std::nullopt;
}

std::error_code deep_flush_region(const std::string &path) noexcept {
  auto failed = [&](const char *what) {
    const std::error_code ec = rpmem::last_errc();
    RPMEM_LOG_ERR("deep flush: %s %s: %s", what, path.c_str(), ec.message().c_str());
    return errc(EIO);
  };
  // "0" (with or without its newline): the region needs no deep flush (its
  // file is then read-only, as on CXL): nothing is written.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed("cannot read");
  char now[8] = {};
  const ssize_t n = ::read(fd, now, sizeof(now) - 1);
  ::close(fd);
  const bool needed = !(n >= 1 && now[0] == '0' && (n == 1 || now[1] == '\n'));
  if (!needed) return {};
  fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return failed("cannot open");
  const bool ok = ::write(fd, "1", 1) == 1;
  const std::error_code ec = ok ? std::error_code{} : failed("writing");
  ::close(fd);
  return ec;
}

std::error_code resolve_device_dax(PoolSet &set, const std::string &sysfs_root) noexcept {
  size_t daxes = 0;
  for (auto &part : set.parts) {
    auto dax = device_dax(part.path, sysfs_root);
    if (!dax) {
      if (part.size == 0) {
        RPMEM_LOG_ERR("part '%s': size autodetection is supported only for device dax",
                      part.path.c_str());
        return errc(EINVAL);
      }
      continue;
    }
    ++daxes;
    if (part.size == 0) part.size = dax->size;
    part.device = dax;
    if (part.size < rpmem::kMinPart) {
      RPMEM_LOG_ERR("device dax '%s' is smaller than the smallest part (%zu bytes)",
                    part.path.c_str(), rpmem::kMinPart);
      return errc(EINVAL);
    }
    if (part.size != dax->size) {
      RPMEM_LOG_ERR("size of device dax '%s' (%llu) does not match the pool set (%llu)",
                    part.path.c_str(), static_cast<unsigned long long>(dax->size),
                    static_cast<unsigned long long>(part.size));
      return errc(EINVAL);
    }
    if (set.parts.size() > 1 && !set.single_hdr && !set.no_hdrs && dax->align != 4096) {
      RPMEM_LOG_ERR(
          "Multiple DAX devices with alignment other than 4KB. Use the SINGLEHDR "
          "poolset option.");
      return errc(EINVAL);
    }
  }
  if (daxes != 0 && daxes != set.parts.size()) {
    RPMEM_LOG_ERR("either all the parts must be Device DAX or none");
    return errc(EINVAL);
  }
  return {};
}

namespace {

// A device DAX's pool header zeroed (mapped in the device's alignment) and
// made persistent, as PMDK did.
std::error_code zero_header(const std::string &path, const DeviceDax &dax) noexcept {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return last_errc();
  const size_t len = std::max<size_t>(dax.align, rpmem::kPoolHdrSize);
  void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::error_code ec;
  if (p == MAP_FAILED) {
    ec = last_errc();
  } else {
    std::memset(p, 0, rpmem::kPoolHdrSize);
    pmem_persist(p, rpmem::kPoolHdrSize);
    ::munmap(p, len);
  }
  ::close(fd);
  if (ec) RPMEM_LOG_ERR("cannot zero the header of '%s': %s", path.c_str(), ec.message().c_str());
  return ec;
}

}  // namespace

std::error_code remove_part(const std::string &path, const std::optional<DeviceDax> &device,
                            bool lock) noexcept {
  if (device) return zero_header(path, *device);  // a device is never unlinked
  int fd = lock ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  if (lock && fd < 0) return last_errc();
  std::error_code ec;
  if ((lock && ::flock(fd, LOCK_EX | LOCK_NB) != 0) || ::unlink(path.c_str()) != 0)
    ec = last_errc();
  if (fd >= 0) ::close(fd);
  return ec;
}

}  // namespace rpmemd
