// SPDX-License-Identifier: BSD-3-Clause
// Persister: how the medium under a target's pool makes bytes durable, and
// the traits by which transports, the session, its log and `rpmemd status`
// tell media apart. rpmemd chooses one per open pool from its mapped parts
// (rpmemd/persister.h, the only place that tells media apart); each medium
// is one file, rpmemd/persister_<medium>.cc. Nothing else asks what the
// medium is.
//
// Offsets are pool offsets (base()[offset]), already checked by the caller
// against the pool's range. Every call is thread-safe: lanes call from many
// threads at once, on disjoint or overlapping ranges.
#ifndef RPMEM_COMMON_TRANSPORT_PERSISTER_H
#define RPMEM_COMMON_TRANSPORT_PERSISTER_H

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <system_error>

namespace rpmem::transport {

struct MediumTraits {
  // `rpmemd status` and its metrics: "pmem", "cxl", "ram" or "disk".
  const char *name;
  // What the pool is, in a phrase ("a file in RAM"), and the log's
  // "medium:" line, which says what durable means there.
  const char *noun;
  const char *description;
  // The log's "persist flush:" line under GPSPM: what a persist calls.
  const char *flush;
  // A NIC may write into the mapping itself and a persist makes that
  // durable (RAM, persistent memory). False where only writes the kernel
  // sees through the CPU are written back (a file in the page cache).
  bool nic_writes;
  // A persist waits for a device (a file system on a disk): durable and
  // posted writes go in whole through write_durable()/write_posted(), which
  // cost less there than stores into the mapping, and lanes' threads mostly
  // wait. Visible bytes are stores into the mapping there too.
  bool waits_for_device;
  // A CPU flush of the stores makes them durable, so the appliance
  // persistency method (APM) is sound (persistent memory).
  bool apm_sound;
  // The visible level costs less than the persistent one: a byte in the
  // target's memory waits for its disk (the page cache). False where being
  // visible costs what being durable costs (RAM, persistent memory): there
  // a visible acknowledgement is a persistent one.
  bool visible_cheaper;
};

class Persister {
 public:
  virtual ~Persister() = default;
  virtual const MediumTraits &traits() const noexcept = 0;
  // Makes [offset, +len) durable; deep: down to the lowest persistence
  // domain (PMDK's pmem_deep_persist). EIO when it could not be.
  virtual std::error_code persist(size_t offset, size_t len, bool deep) noexcept = 0;
  // Writes len bytes of src at offset (whole-word stores, or a write of the
  // file) and makes them durable, in one step.
  virtual std::error_code write_durable(size_t offset, const uint8_t *src, size_t len,
                                        bool deep) noexcept = 0;
  // The same write, not durable yet (a posted flush): a later persist() of
  // the range makes it so.
  virtual std::error_code write_posted(size_t offset, const uint8_t *src, size_t len) noexcept = 0;
  // persist() of a page mapped on its own from one of the pool's files (a
  // part's header page).
  virtual std::error_code persist_mapped(void *addr, size_t len) noexcept = 0;
  // Makes the whole pool durable, before it is unmapped (close).
  virtual std::error_code sync_all() noexcept = 0;

  // The visible level (proto::Durability::kVisible). write_visible() writes
  // len bytes of src at offset (whole-word stores into the mapping where
  // visible costs less), and made_visible() takes note of bytes a transport
  // stored into the mapping; each returns once the pool's own reads see the
  // bytes. A later persist(), write_durable() or
  // persist_visible() makes every visible byte durable, as do sync_all()
  // and a write_back() they are old enough for. Where visible costs what
  // durable costs (traits().visible_cheaper false), they are durable at
  // once: these default to the persistent calls.
  virtual std::error_code write_visible(size_t offset, const uint8_t *src, size_t len) noexcept {
    return write_durable(offset, src, len, false);
  }
  virtual std::error_code made_visible(size_t offset, size_t len) noexcept {
    return persist(offset, len, false);
  }
  // Makes every visible byte durable (a persistent drain).
  virtual std::error_code persist_visible() noexcept { return {}; }
  // Makes every visible byte durable if the oldest one not durable yet has
  // been visible for `older_than` or longer (rpmemd's write-back bound).
  virtual std::error_code write_back(std::chrono::nanoseconds /*older_than*/) noexcept {
    return {};
  }
  // How long the oldest visible byte not durable yet has been visible;
  // zero when every one is durable.
  virtual std::chrono::nanoseconds unpersisted_age() const noexcept { return {}; }
};

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_PERSISTER_H
