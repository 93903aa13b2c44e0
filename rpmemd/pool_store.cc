// SPDX-License-Identifier: BSD-3-Clause
// PoolStore: pool set names confined to the directory; create/open/remove.
#include "rpmemd/pool_store.h"

#include "common/error.h"
#include "common/log.h"
#include "rpmemd/pool_device_dax.h"
#include "rpmemd/pool_hdr.h"
#include "rpmemd/pool_mapping.h"
#include "rpmemd/poolset.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <utility>

namespace rpmemd {
namespace {

using rpmem::errc;
using rpmem::last_errc;

std::error_code real_path(const std::string &path, std::string &out) {
  char *r = ::realpath(path.c_str(), nullptr);
  if (r == nullptr) return last_errc();
  out = r;
  std::free(r);
  return {};
}

// True when the name, read lexically, stays below the directory: not
// absolute, and no ".." climbs above its starting point.
bool lexically_confined(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find('\0') != std::string_view::npos)
    return false;
  long depth = 0;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t end = name.find('/', pos);
    if (end == std::string_view::npos) end = name.size();
    std::string_view comp = name.substr(pos, end - pos);
    if (comp == "..") {
      if (--depth < 0) return false;
    } else if (!comp.empty() && comp != ".") {
      ++depth;
    }
    pos = end + 1;
  }
  return true;
}

// Reads and parses the pool set file at `path` (canonical, no symlink).
std::error_code load_set(const std::string &path, PoolSet &out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return last_errc();
  std::string text;
  std::error_code ec;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ec = last_errc();
  } else if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxPoolSetFileSize) {
    RPMEM_LOG_ERR("'%s' is not a regular file of at most %zu bytes", path.c_str(),
                  kMaxPoolSetFileSize);
    ec = errc(EINVAL);
  } else {
    char buf[4096];
    for (;;) {
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        ec = last_errc();
        break;
      }
      if (r == 0) break;
      text.append(buf, static_cast<size_t>(r));
      if (text.size() > kMaxPoolSetFileSize) {
        ec = errc(EINVAL);
        break;
      }
    }
  }
  ::close(fd);
  if (ec) return ec;
  auto parsed = parse_poolset(text);
  if (!parsed) {
    // The caller logs PMDK's line ("cannot create pool set -- ...:
    // Invalid argument"); the reason is detail, at debug level.
    RPMEM_LOG_DEBUG("invalid pool set '%s': %s", path.c_str(), parsed.error().message.c_str());
    return parsed.error().code;
  }
  out = std::move(parsed).value();
  return resolve_device_dax(out);
}

// The set-up pool to `out` when `ec` is clear; else it is discarded (the
// parts it created are removed) and `ec` returned.
std::error_code hand_over(std::unique_ptr<PoolMapping> pool, std::error_code ec,
                          std::unique_ptr<MappedPool> &out) {
  if (ec) {
    pool->discard();
    return ec;
  }
  out = std::move(pool);
  return {};
}

}  // namespace

PoolStore::PoolStore(std::string dir) : dir_(std::move(dir)) {}

std::error_code PoolStore::path_of(std::string_view name, std::string &out) const noexcept try {
  ResolvedName r;
  if (auto ec = resolve(name, r)) return ec;
  out = std::move(r.path);
  return {};
} catch (const std::bad_alloc &) {
  return std::make_error_code(std::errc::not_enough_memory);
}

std::error_code PoolStore::resolve(std::string_view name, ResolvedName &out) const {
  auto refuse = [&](const char *why) {
    RPMEM_LOG_ERR("pool set name '%.*s' %s", static_cast<int>(name.size()), name.data(), why);
    return errc(kBadName);
  };
  if (!lexically_confined(name)) return refuse("is absolute or leaves the pool set directory");
  std::string root;
  if (auto ec = real_path(dir_, root)) return ec;
  auto below_root = [&](const std::string &p, bool or_root) {
    if (p == root) return or_root;
    return root == "/" || (p.size() > root.size() && p.compare(0, root.size(), root) == 0 &&
                           p[root.size()] == '/');
  };

  // The directory holding the entry must itself be inside: a name that goes
  // out through a symlinked directory and comes back is refused too.
  std::string_view n = name;
  while (n.size() > 1 && n.back() == '/') n.remove_suffix(1);
  size_t slash = n.rfind('/');
  std::string_view base = slash == std::string_view::npos ? n : n.substr(slash + 1);
  std::string parent;
  if (slash == std::string_view::npos) {
    parent = root;
  } else if (auto ec = real_path(root + "/" + std::string(n.substr(0, slash)), parent)) {
    return ec;
  }
  if (!below_root(parent, true)) return refuse("resolves outside the pool set directory");

  if (auto ec = real_path(root + "/" + std::string(name), out.path)) return ec;
  if (!below_root(out.path, false)) return refuse("resolves outside the pool set directory");
  out.entry =
      (base.empty() || base == "." || base == "..") ? out.path : parent + "/" + std::string(base);
  return {};
}

std::error_code PoolStore::create(std::string_view name, const rpmem::PoolAttr *attr,
                                  std::unique_ptr<MappedPool> &out) noexcept {
  try {
    ResolvedName resolved;
    if (auto ec = resolve(name, resolved)) return ec;
    const std::string &path = resolved.path;
    PoolSet set;
    if (auto ec = load_set(path, set)) return ec;

    const bool no_attr = attr == nullptr || attr->is_zero();
    if (no_attr != set.no_hdrs) {
      RPMEM_LOG_ERR("pool set '%s': %s", path.c_str(),
                    no_attr ? "a pool without attributes needs OPTION NOHDRS"
                            : "OPTION NOHDRS does not allow attributes");
      return errc(EINVAL);
    }
    if (!no_attr && ((attr->incompat_features & kFeatSingleHdr) != 0) != set.single_hdr) {
      RPMEM_LOG_ERR("pool set '%s': OPTION SINGLEHDR does not match the incompat flags %#x",
                    path.c_str(), attr->incompat_features);
      return errc(EINVAL);
    }

    auto pool = std::make_unique<PoolMapping>(std::move(set));
    std::error_code ec = pool->open_parts(/*create=*/true);
    if (!ec) ec = pool->map();
    if (!ec && !no_attr && (attr->compat_features & kFeatCheckBadBlocks))
      ec = pool->check_bad_blocks();
    if (!ec && !no_attr) ec = pool->init_headers(*attr);
    return hand_over(std::move(pool), ec, out);
  } catch (const std::bad_alloc &) {
    return errc(ENOMEM);
  }
}

std::error_code PoolStore::open(std::string_view name, std::unique_ptr<MappedPool> &out,
                                rpmem::PoolAttr &attr_out) noexcept {
  try {
    ResolvedName resolved;
    if (auto ec = resolve(name, resolved)) return ec;
    const std::string &path = resolved.path;
    PoolSet set;
    if (auto ec = load_set(path, set)) return ec;

    auto pool = std::make_unique<PoolMapping>(std::move(set));
    std::error_code ec = pool->open_parts(/*create=*/false);
    if (!ec) ec = pool->map();
    if (!ec) ec = pool->check_headers(attr_out);
    if (!ec && (attr_out.compat_features & kFeatCheckBadBlocks)) ec = pool->check_bad_blocks();
    return hand_over(std::move(pool), ec, out);
  } catch (const std::bad_alloc &) {
    return errc(ENOMEM);
  }
}

std::error_code PoolStore::remove(std::string_view name, bool force, bool remove_poolset) noexcept {
  try {
    ResolvedName resolved;
    std::error_code ec = resolve(name, resolved);
    if (ec == errc(kBadName)) return ec;
    if (ec) return force ? std::error_code{} : ec;  // the pool set file is not there

    PoolSet set;
    std::error_code parse_ec = load_set(resolved.path, set);
    if (parse_ec && !force) return parse_ec;

    std::error_code first;
    if (!parse_ec) {
      // Every part is tried even after a failure, as PMDK does.
      for (const auto &part : set.parts) {
        std::error_code part_ec = remove_part(part.path, part.device, true);
        if (part_ec && !force) {
          RPMEM_LOG_ERR("cannot remove part '%s': %s", part.path.c_str(),
                        part_ec.message().c_str());
          if (!first) first = part_ec;
        }
      }
    }
    // PMDK quirk kept: the pool set file goes even when a part could not.
    if (remove_poolset && ::unlink(resolved.entry.c_str()) != 0 && !force && !first)
      first = last_errc();
    return first;
  } catch (const std::bad_alloc &) {
    return errc(ENOMEM);
  }
}

}  // namespace rpmemd
