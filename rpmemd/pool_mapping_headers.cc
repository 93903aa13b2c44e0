// SPDX-License-Identifier: BSD-3-Clause
// PoolMapping's pool headers: written on create, checked on open, rewritten
// by set_attr, each made durable by the pool's persister; and the UUIDs a
// create generates.
#include "common/error.h"
#include "common/log.h"
#include "common/random.h"
#include "rpmemd/pool_mapping.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace rpmemd {
namespace {

constexpr size_t kHdrSize = rpmem::kPoolHdrSize;
using rpmem::errc, rpmem::last_errc, rpmem::PoolAttr;

bool is_zero_uuid(const Uuid &u) { return is_zero_bytes(u.data(), u.size()); }

}  // namespace

std::error_code generate_uuid(Uuid &out) noexcept {
  if (rpmem::fill_random(out.data(), out.size())) return errc(EIO);
  // PMDK's struct uuid keeps time_hi_and_version as a host-order (LE) u16:
  // the version nibble is the top of byte 7; the variant is in byte 8.
  out[7] = static_cast<uint8_t>((out[7] & 0x0F) | 0x40);
  out[8] = static_cast<uint8_t>((out[8] & 0x3F) | 0x80);
  return {};
}

// The header pages (first 4096 bytes) of the parts that carry a header,
// mapped on their own for the time of one operation, as PMDK's util_map_hdr.
class PoolMapping::HeaderPages {
 public:
  HeaderPages() = default;
  HeaderPages(const HeaderPages &) = delete;
  HeaderPages &operator=(const HeaderPages &) = delete;
  ~HeaderPages() {
    for (size_t i = 0; i < pages_.size(); ++i)
      if (own_[i]) ::munmap(pages_[i], kHdrSize);
  }

  // A device DAX maps only in its alignment's units: its header is taken
  // from the pool's mapping (`base`), which starts at its first byte.
  std::error_code map(const std::vector<Part> &parts, size_t count, uint8_t *base) {
    for (size_t i = 0; i < count; ++i) {
      if (parts[i].device && parts[i].device->align > kHdrSize && parts[i].file_off == 0 &&
          base != nullptr) {
        pages_.push_back(base + parts[i].map_start);
        own_.push_back(false);
        continue;
      }
      int flags = parts[i].map_sync ? (MAP_SHARED_VALIDATE | MAP_SYNC) : MAP_SHARED;
      void *p = ::mmap(nullptr, kHdrSize, PROT_READ | PROT_WRITE, flags, parts[i].fd, 0);
      if (p == MAP_FAILED) return last_errc();
      pages_.push_back(p);
      own_.push_back(true);
    }
    return {};
  }
  size_t count() const { return pages_.size(); }
  void *page(size_t i) const { return pages_[i]; }
  PoolHdr read(size_t i) const {
    PoolHdr h;
    std::memcpy(&h, pages_[i], sizeof(h));
    return h;
  }

 private:
  std::vector<void *> pages_;
  std::vector<bool> own_;  // mapped here (not the pool's mapping)
};

std::error_code PoolMapping::persist_header(void *hdr) noexcept {
  return persister_->persist_mapped(hdr, kHdrSize);
}

std::error_code PoolMapping::init_headers(const PoolAttr &attr) noexcept {
  const size_t nhdrs = set_.header_count();
  if (nhdrs == 0) return {};

  Uuid poolset_uuid = attr.poolset_uuid;
  if (is_zero_uuid(poolset_uuid))
    if (auto ec = generate_uuid(poolset_uuid)) return ec;
  std::vector<Uuid> uuids(nhdrs);
  for (auto &u : uuids)
    if (auto ec = generate_uuid(u)) return ec;
  if (!is_zero_uuid(attr.uuid)) uuids[0] = attr.uuid;

  HeaderPages pages;
  if (auto ec = pages.map(parts_, nhdrs, base_)) return ec;
  // A device DAX is not created: like a reused file, its header must be zero.
  for (size_t p = 0; p < nhdrs; ++p) {
    if (parts_[p].device && !is_zero_bytes(pages.page(p), kHdrSize)) {
      RPMEM_LOG_ERR("non-empty file detected: '%s'", parts_[p].path.c_str());
      return errc(EEXIST);
    }
  }
  for (size_t p = 0; p < nhdrs; ++p) {
    PoolHdr h{};
    set_shared_attr(h, attr);
    if (set_.single_hdr) h.incompat_features |= kFeatSingleHdr;
    h.poolset_uuid = poolset_uuid;
    h.uuid = uuids[p];
    // A ring of parts; with SINGLEHDR (nhdrs == 1) both links are part 0.
    h.prev_part_uuid = uuids[(p + nhdrs - 1) % nhdrs];
    h.next_part_uuid = uuids[(p + 1) % nhdrs];
    h.prev_repl_uuid = is_zero_uuid(attr.prev_uuid) ? uuids[0] : attr.prev_uuid;
    h.next_repl_uuid = is_zero_uuid(attr.next_uuid) ? uuids[0] : attr.next_uuid;
    struct stat st {};
    if (::fstat(parts_[p].fd, &st) != 0) return last_errc();
    h.crtime = static_cast<uint64_t>(st.st_ctime);
    if (is_zero_bytes(attr.user_flags.data(), attr.user_flags.size()))
      h.arch_flags = native_arch_flags();
    update_checksum(h);
    std::memcpy(pages.page(p), &h, sizeof(h));
    if (auto ec = persist_header(pages.page(p))) return ec;
  }
  return {};
}

std::error_code PoolMapping::check_headers(PoolAttr &attr_out) noexcept {
  attr_out = PoolAttr{};
  const size_t nhdrs = set_.header_count();
  if (nhdrs == 0) return {};

  HeaderPages pages;
  if (auto ec = pages.map(parts_, nhdrs, base_)) return ec;
  std::vector<PoolHdr> h;
  h.reserve(nhdrs);
  for (size_t p = 0; p < nhdrs; ++p) h.push_back(pages.read(p));

  auto fail = [&](size_t p, const char *what) {
    RPMEM_LOG_ERR("invalid pool header in part %zu ('%s'): %s", p, parts_[p].path.c_str(), what);
    return errc(EINVAL);
  };
  const PoolHdr &h0 = h[0];
  for (size_t p = 0; p < nhdrs; ++p) {
    const PoolHdr &hp = h[p];
    if (is_zero(hp)) return fail(p, "pool header zeroed");
    if (std::memcmp(hp.signature, h0.signature, sizeof(hp.signature)) != 0)
      return fail(p, "signature mismatch");
    if (hp.major != h0.major) return fail(p, "major version mismatch");
    if (hp.compat_features != h0.compat_features || hp.incompat_features != h0.incompat_features ||
        hp.ro_compat_features != h0.ro_compat_features)
      return fail(p, "feature flags mismatch");
    if (!checksum_valid(hp)) return fail(p, "invalid checksum");
    if (hp.poolset_uuid != h0.poolset_uuid) return fail(p, "wrong pool set UUID");
    if (hp.prev_repl_uuid != h0.prev_repl_uuid || hp.next_repl_uuid != h0.next_repl_uuid)
      return fail(p, "wrong replica UUID");
    if (std::memcmp(&hp.arch_flags, &h0.arch_flags, sizeof(hp.arch_flags)) != 0)
      return fail(p, "wrong architecture flags");
    if (hp.prev_part_uuid != h[(p + nhdrs - 1) % nhdrs].uuid ||
        hp.next_part_uuid != h[(p + 1) % nhdrs].uuid)
      return fail(p, "wrong part UUID");
  }
  attr_out = attr_from_hdr(h0);
  return {};
}

std::error_code PoolMapping::set_attr(const PoolAttr *attr) noexcept {
  const bool zero = attr == nullptr || attr->is_zero();
  const size_t nhdrs = set_.header_count();
  if (nhdrs == 0) {
    if (zero) return {};
    RPMEM_LOG_ERR("cannot set pool attributes on a pool set without headers (NOHDRS)");
    return errc(EINVAL);
  }
  HeaderPages pages;
  if (auto ec = pages.map(parts_, nhdrs, base_)) return ec;
  const PoolAttr zeros{};
  const PoolAttr &a = zero ? zeros : *attr;
  for (size_t p = 0; p < nhdrs; ++p) {
    PoolHdr h = pages.read(p);
    set_shared_attr(h, a);
    // Zeroed attributes keep the part UUIDs and their links (PMDK crashed
    // here); otherwise part 0 takes attr.uuid and its neighbours follow.
    if (!zero) {
      if (p == 0) h.uuid = a.uuid;
      if (p == nhdrs - 1) h.next_part_uuid = a.uuid;
      if (p == 1 % nhdrs) h.prev_part_uuid = a.uuid;
    }
    update_checksum(h);
    std::memcpy(pages.page(p), &h, sizeof(h));
    if (auto ec = persist_header(pages.page(p))) return ec;
  }
  return {};
}

}  // namespace rpmemd
