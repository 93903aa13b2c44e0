// SPDX-License-Identifier: BSD-3-Clause
// Soak: several pools open at once (created from several threads), one
// thread per lane mixing persist, relaxed persist, flush/drain, deep
// persist and read on random ranges of its own region, for a bounded time
// (RPMEM_SOAK_SECONDS; 20 s, or 8 s under sanitizers). Zero errors, every
// read sees what was acknowledged, and the part files end up equal to the
// local pools.
#include "tests/integration/harness.h"
#include "tests/sanitizers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "librpmem.h"

#if defined(RPMEM_TEST_ASAN) || defined(RPMEM_TEST_TSAN)
#define RPMEM_SOAK_SANITIZED 1
#endif

namespace rpmem_test {
namespace {

using Clock = std::chrono::steady_clock;

#ifdef RPMEM_SOAK_SANITIZED
// Sanitized builds run an order of magnitude slower: smaller ranges, and a
// data-path bound that a loaded 2-core machine cannot hit by accident.
constexpr size_t kBigRange = 256 * 1024;
constexpr const char *kTimeout = "60";
#else
constexpr size_t kBigRange = kMiB;
constexpr const char *kTimeout = "20";
#endif

std::chrono::seconds soak_duration() {
  if (const char *v = std::getenv("RPMEM_SOAK_SECONDS"); v && std::atoi(v) > 0)
    return std::chrono::seconds(std::atoi(v));
#ifdef RPMEM_SOAK_SANITIZED
  return std::chrono::seconds(8);
#else
  return std::chrono::seconds(20);
#endif
}

struct SoakPool {
  std::string name;
  std::vector<Part> parts;
  bool headers;
  std::unique_ptr<LocalPool> local;
  RPMEMpool *rpp = nullptr;
  unsigned nlanes = 4;
  size_t size = 0;
};

struct Counters {
  std::atomic<uint64_t> persist{0}, relaxed{0}, flush{0}, drain{0}, deep{0}, read{0}, bytes{0};
  std::atomic<uint64_t> errors{0}, mismatches{0};
};

// One lane's worker: region [from, to) of the pool is its own.
void worker(SoakPool &p, unsigned lane, size_t from, size_t to, Clock::time_point end,
            Counters &c) {
  std::mt19937_64 rng(lane * 7919 + std::hash<std::string>()(p.name));
  uint8_t *local = p.local->data();
  std::vector<uint8_t> back;
  auto fail = [&](const char *op, size_t off, size_t len) {
    ++c.errors;
    ADD_FAILURE() << p.name << " lane " << lane << ": " << op << " at " << off << "+" << len << ": "
                  << rpmem_errormsg();
  };
  auto pick = [&](size_t &off, size_t &len) {
    const size_t span = to - from;
    size_t max =
        (rng() % 16 == 0) ? std::min<size_t>(span, kBigRange) : std::min<size_t>(span, 65536);
    len = 1 + rng() % max;
    off = from + rng() % (span - len + 1);
  };
  auto scribble = [&](size_t off, size_t len) {
    uint64_t x = rng();
    for (size_t i = 0; i < len; ++i)
      local[off + i] = static_cast<uint8_t>((x >> ((i % 8) * 8)) + i);
  };
  while (Clock::now() < end && c.errors == 0) {
    size_t off, len;
    pick(off, len);
    switch (rng() % 6) {
      case 0:
      case 1: {
        scribble(off, len);
        unsigned flags = (rng() % 2) ? RPMEM_PERSIST_RELAXED : 0;
        if (rpmem_persist(p.rpp, off, len, lane, flags)) return fail("persist", off, len);
        ++(flags ? c.relaxed : c.persist);
        c.bytes += len;
        break;
      }
      case 2: {
        int n = 1 + static_cast<int>(rng() % 8);
        for (int i = 0; i < n; ++i) {
          pick(off, len);
          scribble(off, len);
          if (rpmem_flush(p.rpp, off, len, lane, (rng() % 2) ? RPMEM_FLUSH_RELAXED : 0))
            return fail("flush", off, len);
          ++c.flush;
          c.bytes += len;
        }
        if (rpmem_drain(p.rpp, lane, 0)) return fail("drain", 0, 0);
        ++c.drain;
        break;
      }
      case 3: {
        scribble(off, len);
        if (rpmem_deep_persist(p.rpp, off, len, lane)) return fail("deep persist", off, len);
        ++c.deep;
        c.bytes += len;
        break;
      }
      default: {
        back.resize(len);
        if (rpmem_read(p.rpp, back.data(), off, len, lane)) return fail("read", off, len);
        ++c.read;
        if (std::memcmp(back.data(), local + off, len) != 0) {
          ++c.mismatches;
          ADD_FAILURE() << p.name << " lane " << lane << ": read " << off << "+" << len
                        << " differs from what was acknowledged";
        }
      }
    }
  }
}

TEST(Soak, ManyLanesAndPoolsMixingEveryOperationLoseNothing) {
  Target target;
  set_env("RPMEM_TIMEOUT", kTimeout);
  const auto duration = soak_duration();
  std::vector<SoakPool> pools(3);
  for (size_t i = 0; i < pools.size(); ++i) {
    auto &p = pools[i];
    p.name = "soak" + std::to_string(i) + ".set";
    p.headers = i == 1;
    // Pool 2 spans two parts (headers off), so ranges cross the part border.
    if (i == 2)
      p.parts = {{4 * kMiB, "s2.part0"}, {4 * kMiB, "s2.part1"}};
    else
      p.parts = {{8 * kMiB, "s" + std::to_string(i) + ".part0"}};
    p.size = 8 * kMiB;
    target.write_poolset(p.name, p.parts, p.headers ? "" : "OPTION NOHDRS\n");
    p.local = std::make_unique<LocalPool>(p.size, static_cast<uint8_t>(i + 1));
  }
  // Created at once from several threads.
  {
    std::vector<std::thread> openers;
    for (auto &p : pools) {
      openers.emplace_back([&p] {
        rpmem_pool_attr attr = sample_attr(5);
        p.rpp = rpmem_create("127.0.0.1", p.name.c_str(), p.local->data(), p.size, &p.nlanes,
                             p.headers ? &attr : nullptr);
      });
    }
    for (auto &t : openers) t.join();
  }
  for (auto &p : pools) ASSERT_NE(p.rpp, nullptr) << p.name << target.log_text();
  // The starting contents, so that every byte is acknowledged from here on.
  for (auto &p : pools) {
    const size_t first = p.headers ? 4096 : 0;
    ASSERT_EQ(rpmem_persist(p.rpp, first, p.size - first, 0, 0), 0) << rpmem_errormsg();
  }

  Counters c;
  const auto end = Clock::now() + duration;
  std::vector<std::thread> workers;
  for (auto &p : pools) {
    const size_t first = p.headers ? 4096 : 0;
    const size_t region = (p.size - first) / p.nlanes;
    for (unsigned lane = 0; lane < p.nlanes; ++lane) {
      size_t from = first + lane * region;
      workers.emplace_back(worker, std::ref(p), lane, from, from + region, end, std::ref(c));
    }
  }
  for (auto &t : workers) t.join();

  // Close from several threads, then compare every byte.
  {
    std::vector<std::thread> closers;
    std::atomic<int> close_errors{0};
    for (auto &p : pools)
      closers.emplace_back([&p, &close_errors] {
        if (rpmem_close(p.rpp)) ++close_errors;
      });
    for (auto &t : closers) t.join();
    EXPECT_EQ(close_errors.load(), 0);
  }
  for (auto &p : pools) {
    auto r = target.remote_pool(p.parts, p.headers);
    ASSERT_GE(r.size(), p.size) << p.name;
    const size_t first = p.headers ? 4096 : 0;
    EXPECT_TRUE(same_bytes(r.data(), p.local->data(), first, p.size - first)) << p.name;
  }
  EXPECT_EQ(c.errors.load(), 0u);
  EXPECT_EQ(c.mismatches.load(), 0u);
  const uint64_t ops = c.persist + c.relaxed + c.flush + c.drain + c.deep + c.read;
  EXPECT_GT(ops, 100u);
  std::printf(
      "soak %llds, %zu threads: %llu persist, %llu relaxed, %llu flush, %llu drain, "
      "%llu deep, %llu read, %llu MiB written\n",
      static_cast<long long>(duration.count()), workers.size(),
      static_cast<unsigned long long>(c.persist.load()),
      static_cast<unsigned long long>(c.relaxed.load()),
      static_cast<unsigned long long>(c.flush.load()),
      static_cast<unsigned long long>(c.drain.load()),
      static_cast<unsigned long long>(c.deep.load()),
      static_cast<unsigned long long>(c.read.load()),
      static_cast<unsigned long long>(c.bytes.load() >> 20));
}

}  // namespace
}  // namespace rpmem_test
