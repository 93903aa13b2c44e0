// SPDX-License-Identifier: BSD-3-Clause
// The primitives rpmem's wire formats are made of, stated once: integers
// little-endian at fixed offsets (load_le/store_le) or one after another
// (Reader, Writer), the bound of an errno carried as a status, and the lane
// operations, which each lane wire (proto.h's tcp lanes, verbs_wire.h's
// verbs lanes) gives codes of its own, translated in one place each.
// No message layouts here: those are proto.h's and verbs_wire.h's.
#ifndef RPMEM_COMMON_WIRE_H
#define RPMEM_COMMON_WIRE_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

namespace rpmem::wire {

// The n bytes (n <= 8) of v at p, least significant first.
constexpr void store_le(uint8_t *p, uint64_t v, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
constexpr uint64_t load_le(const uint8_t *p, size_t n) noexcept {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
constexpr void store_le32(uint8_t *p, uint32_t v) noexcept { store_le(p, v, 4); }
constexpr uint32_t load_le32(const uint8_t *p) noexcept {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// An errno carried on the wire (a lane reply's status, a hello's) is below
// this bound (Linux's errno values all are); a larger value is malformed.
inline constexpr uint32_t kErrnoLimit = 4096;
constexpr bool is_errno(uint64_t status) noexcept { return status < kErrnoLimit; }
// The errno a status read from the wire names: itself, or EPROTO when it is
// out of bounds.
constexpr int errno_of(uint32_t status) noexcept {
  return is_errno(status) ? static_cast<int>(status) : EPROTO;
}

// Appends little-endian integers and raw bytes to a buffer it owns.
class Writer {
 public:
  void u8(uint8_t v) { b_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void raw(const void *p, size_t n) {
    if (n == 0) return;
    const auto *c = static_cast<const uint8_t *>(p);
    b_.insert(b_.end(), c, c + n);
  }
  // n more bytes, for the caller to write at the pointer returned.
  uint8_t *grow(size_t n) {
    const size_t at = b_.size();
    b_.resize(at + n);
    return b_.data() + at;
  }
  size_t size() const noexcept { return b_.size(); }
  // What was written so far, at byte `at` (< size()).
  uint8_t *at(size_t at) noexcept { return b_.data() + at; }
  std::vector<uint8_t> take() noexcept { return std::move(b_); }

 private:
  void put(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> b_;
};

// Reads little-endian integers from a span; any read past the end fails the
// whole decode (ok() turns false and the values read are zero).
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) noexcept : b_(b) {}
  uint8_t u8() noexcept { return static_cast<uint8_t>(get(1)); }
  uint16_t u16() noexcept { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() noexcept { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() noexcept { return get(8); }
  bool raw(void *out, size_t n) noexcept {
    const uint8_t *p = take(n);
    if (!p) return false;
    if (n > 0) std::memcpy(out, p, n);
    return true;
  }
  // The next n bytes where they are; nullptr when fewer are left.
  const uint8_t *take(size_t n) noexcept {
    if (!ok_ || b_.size() - pos_ < n) {
      ok_ = false;
      return nullptr;
    }
    pos_ += n;
    return b_.data() + pos_ - n;
  }
  bool ok() const noexcept { return ok_; }
  bool done() const noexcept { return ok_ && pos_ == b_.size(); }

 private:
  uint64_t get(size_t n) noexcept {
    const uint8_t *p = take(n);
    return p ? load_le(p, n) : 0;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// What a lane request asks of the target, whatever the wire: proto.h
// (DataOp) and verbs_wire.h (MsgOp) each translate their codes to and from
// these in one place. The lanes' counters (lane_stats.h) count by them.
enum class LaneOp : uint8_t {
  kPersist,      // durable before the reply
  kDeepPersist,  // the same, down to the lowest persistence domain
  kFlush,        // written; durable by the next drain
  kDrain,        // every earlier flush of the lane durable before the reply
  kRead,         // bytes of the pool back to the client
};

}  // namespace rpmem::wire

#endif  // RPMEM_COMMON_WIRE_H
