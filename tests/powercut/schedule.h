// SPDX-License-Identifier: BSD-3-Clause
// The power-cut test's workload, shared by the client (which runs it against
// rpmemd) and the verifier (which replays it against the part files read
// from the disk image): a seeded, deterministic sequence of steps per lane,
// and the bytes every write puts at every pool offset.
//
// The pool is a two-part set, each part 2 MiB with its own header, so pool
// offset X is part 0's byte X below 2 MiB and part 1's byte X - 2 MiB + 4096
// above. Who writes where (every byte has one owner lane, so a lane's own
// order is the order of the writes to a byte):
//  - the shared pages [4096, 4096 + 64 KiB): 256-byte slots dealt round robin
//    to the lanes, so blocks of different lanes share every 4 KiB page;
//  - the rest, cut into one contiguous region per lane at unaligned offsets;
//    a lane walks its region with a cursor (random gaps, unaligned starts and
//    lengths) and wraps at its end, so newer blocks overwrite older ones at
//    other alignments; the lane whose region holds the part boundary also
//    writes blocks that straddle it.
// A step is one persist, one relaxed persist, one deep persist, or a batch of
// flushes (mixed flags, sometimes longer than rpmemd's 64-entry posted-flush
// table) followed by a drain. Blocks of one batch never overlap.
#ifndef RPMEM_TESTS_POWERCUT_SCHEDULE_H
#define RPMEM_TESTS_POWERCUT_SCHEDULE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace powercut {

inline constexpr size_t kPartSize = 2 * 1024 * 1024;
inline constexpr size_t kHdrSize = 4096;
// Client offsets [0, kPoolSize): part 0 whole, part 1 without its header.
inline constexpr size_t kPoolSize = 2 * kPartSize - kHdrSize;
inline constexpr size_t kBoundary = kPartSize;  // first pool offset in part 1
inline constexpr size_t kSharedBegin = kHdrSize;
inline constexpr size_t kSharedEnd = kSharedBegin + 64 * 1024;
inline constexpr size_t kSlot = 256;

// Where pool offset `off` is: part index and the offset in that part file.
inline void part_of(size_t off, unsigned *part, size_t *file_off) {
  if (off < kBoundary) {
    *part = 0;
    *file_off = off;
  } else {
    *part = 1;
    *file_off = off - kBoundary + kHdrSize;
  }
}

inline uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The bytes write number `index` of `lane` puts at pool offsets [off, off+len).
class Content {
 public:
  Content(uint64_t seed, unsigned lane, uint64_t index)
      : key_(mix64(seed ^ mix64((uint64_t{lane} << 48) ^ index))) {}
  uint8_t at(size_t off) const {
    return static_cast<uint8_t>(mix64(key_ ^ (off >> 3)) >> ((off & 7) * 8));
  }
  void fill(uint8_t *pool, size_t off, size_t len) const {
    for (size_t i = off; i < off + len; ++i) pool[i] = at(i);
  }

 private:
  uint64_t key_;
};

enum class Kind { kPersist, kPersistRelaxed, kDeepPersist, kFlushBatch };

inline const char *kind_name(Kind k) {
  switch (k) {
    case Kind::kPersist:
      return "persist";
    case Kind::kPersistRelaxed:
      return "persist-relaxed";
    case Kind::kDeepPersist:
      return "deep-persist";
    case Kind::kFlushBatch:
      return "flush";
  }
  return "?";
}

struct Block {
  uint64_t index;  // per lane, from 0: names the write and its content
  size_t off, len;
  unsigned flush_flags;  // kFlushBatch only: 0 or RPMEM_FLUSH_RELAXED (1)
};

struct Step {
  Kind kind;
  std::vector<Block> blocks;  // one, or the batch's flushes
};

// One lane's steps: the same seed, lane and lane count give the same steps.
class LaneSchedule {
 public:
  LaneSchedule(uint64_t seed, unsigned lane, unsigned lanes)
      : lane_(lane), lanes_(lanes), rng_(mix64(seed * 31 + lane + 1)) {
    const size_t rest = kPoolSize - kSharedEnd;
    const size_t share = rest / lanes;
    // Region edges 8-byte aligned but not page aligned: neighbours share pages.
    begin_ = kSharedEnd + share * lane;
    end_ = lane + 1 == lanes ? kPoolSize : kSharedEnd + share * (lane + 1);
    cursor_ = begin_;
    holds_boundary_ = begin_ + 16384 < kBoundary && kBoundary + 16384 < end_;
  }

  Step next() {
    Step s;
    const unsigned r = uniform(100);
    s.kind = r < 30   ? Kind::kPersist
             : r < 50 ? Kind::kPersistRelaxed
             : r < 60 ? Kind::kDeepPersist
                      : Kind::kFlushBatch;
    size_t count = 1;
    if (s.kind == Kind::kFlushBatch) count = uniform(6) == 0 ? 65 + uniform(40) : 1 + uniform(8);
    for (size_t tries = 0; s.blocks.size() < count && tries < 4 * count; ++tries) {
      Block b = pick();
      bool overlaps = false;
      for (const Block &o : s.blocks) overlaps |= b.off < o.off + o.len && o.off < b.off + b.len;
      if (overlaps) continue;
      b.index = next_index_++;
      b.flush_flags = s.kind == Kind::kFlushBatch ? uniform(2) : 0;
      s.blocks.push_back(b);
    }
    return s;
  }

 private:
  uint64_t bits() { return rng_ = mix64(rng_); }
  unsigned uniform(unsigned n) { return static_cast<unsigned>(bits() % n); }

  Block pick() {
    Block b{};
    const unsigned r = uniform(100);
    if (r < 20) {  // a piece of one of this lane's slots in the shared pages
      const size_t slots = (kSharedEnd - kSharedBegin) / kSlot / lanes_;
      const size_t slot = uniform(static_cast<unsigned>(slots)) * lanes_ + lane_;
      const size_t start = uniform(kSlot - 1);
      b.off = kSharedBegin + slot * kSlot + start;
      b.len = 1 + uniform(static_cast<unsigned>(kSlot - start));
      return b;
    }
    if (r < 28 && holds_boundary_) {  // straddles the part boundary
      const size_t before = 1 + uniform(8192), after = 1 + uniform(8192);
      b.off = kBoundary - before;
      b.len = before + after;
      return b;
    }
    const unsigned size_class = uniform(10);
    b.len = size_class < 3   ? 1 + uniform(64)
            : size_class < 8 ? 65 + uniform(4096 - 64)
                             : 4097 + uniform(60 * 1024);
    size_t start = cursor_ + uniform(300);
    if (start + b.len > end_) start = begin_ + uniform(4096);  // wrap over old blocks
    b.off = start;
    b.len = std::min(b.len, end_ - start);
    cursor_ = b.off + b.len;
    return b;
  }

  unsigned lane_, lanes_;
  uint64_t rng_;
  size_t begin_, end_, cursor_;
  bool holds_boundary_;
  uint64_t next_index_ = 0;
};

}  // namespace powercut

#endif  // RPMEM_TESTS_POWERCUT_SCHEDULE_H
