// SPDX-License-Identifier: BSD-3-Clause
// The C ABI of librpmem.so.1: argument checks, errno, and the one place
// where C++ meets extern "C". No exception crosses this file.
#include "librpmem/errormsg.h"
#include "librpmem/pool.h"

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

#include "librpmem.h"

struct rpmem_pool {
  std::unique_ptr<rpmem::Pool> pool;
};

static_assert(sizeof(rpmem_pool_attr) == sizeof(rpmem::PoolAttr));
static_assert(offsetof(rpmem_pool_attr, user_flags) == offsetof(rpmem::PoolAttr, user_flags));
static_assert(offsetof(rpmem_pool_attr, major) == offsetof(rpmem::PoolAttr, major));

namespace {

using rpmem::set_errormsg;

int einval(const char *msg) {
  set_errormsg("%s", msg);
  errno = EINVAL;
  return -1;
}

// Sets errno from a result of the Pool: 0 -> 0, else -1.
int result(int err) {
  if (err == 0) return 0;
  errno = err > 0 ? err : EIO;
  return -1;
}

bool check_pool_args(const char *target, const char *pool_set_name, void *pool_addr,
                     size_t pool_size, unsigned *nlanes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (!target) return einval("target cannot be NULL") == 0;
  if (!pool_set_name) return einval("pool set name cannot be NULL") == 0;
  if (!pool_addr) return einval("invalid pool address") == 0;
  if (reinterpret_cast<uintptr_t>(pool_addr) % page) {
    set_errormsg("Pool address must be aligned to page size (%zu)", page);
    errno = EINVAL;
    return false;
  }
  if (pool_size % page) {
    set_errormsg("Pool size must be aligned to page size (%zu)", page);
    errno = EINVAL;
    return false;
  }
  if (pool_size == 0) return einval("invalid pool size") == 0;
  if (!nlanes) return einval("lanes pointer cannot be NULL") == 0;
  if (*nlanes == 0) return einval("number of lanes must be positive") == 0;
  return true;
}

RPMEMpool *connect(const char *target, const char *pool_set_name, void *pool_addr, size_t pool_size,
                   unsigned *nlanes, bool create, const rpmem_pool_attr *create_attr,
                   rpmem_pool_attr *open_attr) {
  if (!check_pool_args(target, pool_set_name, pool_addr, pool_size, nlanes)) return nullptr;
  try {
    rpmem::PoolArgs args;
    args.target = target;
    args.pool_set = pool_set_name;
    args.addr = pool_addr;
    args.size = pool_size;
    args.nlanes = *nlanes;
    args.create = create;
    if (create_attr)
      std::memcpy(static_cast<void *>(&args.create_attr), create_attr, sizeof(*create_attr));
    auto rpp = std::make_unique<rpmem_pool>();
    unsigned granted = 0;
    rpmem::PoolAttr attr;
    if (int err = rpmem::Pool::connect(args, rpp->pool, granted, open_attr ? &attr : nullptr)) {
      result(err);
      return nullptr;
    }
    *nlanes = granted;
    if (open_attr) std::memcpy(open_attr, &attr, sizeof(*open_attr));
    return rpp.release();
  } catch (...) {
    set_errormsg("out of memory");
    errno = ENOMEM;
    return nullptr;
  }
}

}  // namespace

// The version script decides what is exported; these must not be hidden.
#pragma GCC visibility push(default)
extern "C" {

RPMEMpool *rpmem_create(const char *target, const char *pool_set_name, void *pool_addr,
                        size_t pool_size, unsigned *nlanes,
                        const struct rpmem_pool_attr *create_attr) {
  return connect(target, pool_set_name, pool_addr, pool_size, nlanes, true, create_attr, nullptr);
}

RPMEMpool *rpmem_open(const char *target, const char *pool_set_name, void *pool_addr,
                      size_t pool_size, unsigned *nlanes, struct rpmem_pool_attr *open_attr) {
  return connect(target, pool_set_name, pool_addr, pool_size, nlanes, false, nullptr, open_attr);
}

int rpmem_set_attr(RPMEMpool *rpp, const struct rpmem_pool_attr *attr) {
  if (!rpp) return einval("invalid pool handle");
  rpmem::PoolAttr a;
  if (attr) std::memcpy(static_cast<void *>(&a), attr, sizeof(*attr));
  return result(rpp->pool->set_attr(attr ? &a : nullptr));
}

int rpmem_close(RPMEMpool *rpp) {
  if (!rpp) return einval("invalid pool handle");
  int err = rpp->pool->close();
  delete rpp;
  return result(err);
}

int rpmem_flush(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane, unsigned flags) {
  if (!rpp) return einval("invalid pool handle");
  return result(rpp->pool->flush(offset, length, lane, flags));
}

int rpmem_drain(RPMEMpool *rpp, unsigned lane, unsigned flags) {
  if (!rpp) return einval("invalid pool handle");
  return result(rpp->pool->drain(lane, flags));
}

int rpmem_persist(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane, unsigned flags) {
  if (!rpp) return einval("invalid pool handle");
  return result(rpp->pool->persist(offset, length, lane, flags));
}

int rpmem_deep_persist(RPMEMpool *rpp, size_t offset, size_t length, unsigned lane) {
  if (!rpp) return einval("invalid pool handle");
  return result(rpp->pool->deep_persist(offset, length, lane));
}

int rpmem_read(RPMEMpool *rpp, void *buff, size_t offset, size_t length, unsigned lane) {
  if (!rpp) return einval("invalid pool handle");
  if (!buff) return einval("invalid buffer");
  return result(rpp->pool->read(buff, offset, length, lane));
}

int rpmem_remove(const char *target, const char *pool_set, int flags) {
  if (!target) return einval("target cannot be NULL");
  if (!pool_set) return einval("pool set name cannot be NULL");
  if (flags & ~(RPMEM_REMOVE_FORCE | RPMEM_REMOVE_POOL_SET))
    return einval("invalid flags specified");
  return result(rpmem::Pool::remove(target, pool_set, flags));
}

const char *rpmem_check_version(unsigned major_required, unsigned minor_required) {
  if (major_required != RPMEM_MAJOR_VERSION) {
    set_errormsg("librpmem major version mismatch (need %u, found %u)", major_required,
                 RPMEM_MAJOR_VERSION);
    return rpmem::errormsg();
  }
  if (minor_required > RPMEM_MINOR_VERSION) {
    set_errormsg("librpmem minor version mismatch (need %u, found %u)", minor_required,
                 RPMEM_MINOR_VERSION);
    return rpmem::errormsg();
  }
  return nullptr;
}

const char *rpmem_errormsg(void) { return rpmem::errormsg(); }

}  // extern "C"
#pragma GCC visibility pop
