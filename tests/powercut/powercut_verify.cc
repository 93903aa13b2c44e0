// SPDX-License-Identifier: BSD-3-Clause
// The power-cut test's verifier: from the client's stdout (what reached the
// host before the power went) and the two part files dumped from the disk
// image, checks that every acknowledged byte survived.
//   powercut_verify CLIENT_LOG PART0 PART1 [BOUND_MS]
// The client's schedule is replayed from the seed in its start line (and
// checked against every issue line that came through). For each pool byte
// whose last write is acknowledged persistent ("ack LANE INDEX p MS" covers
// every write of LANE up to INDEX), the byte must hold that write's value,
// or the value of a later write of the same lane, one issued after that
// acknowledgement and perhaps in flight when the power went (or
// acknowledged on a line that did not reach the host). Bytes no
// acknowledged write covers are not checked.
// Visible acknowledgements ("ack LANE INDEX v MS") are checked as
// persistent ones when they are older than BOUND_MS (the target's
// visible-writeback) at the power cut, whose time is taken from the last
// ack line that came through (earlier than the real cut: ages come out
// shorter, never longer); the younger ones are counted, not checked.
// After a "crash PID" line (rpmemd killed, then the pool opened again
// before the cut: powercut_client's POWERCUT_CRASH_AFTER) every visible
// acknowledgement before it is checked, whatever its age.
// Exit status: 0 nothing lost, 1 acknowledged bytes lost, 2 bad input.
#include "tests/powercut/schedule.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using powercut::Block;
using powercut::Content;
using powercut::Kind;

// How many writes past the last issue or ack line the host saw a lane may
// have got: its lines still in the guest's console buffers (a few KiB, some
// tens of lines) and what it did while the watcher was cutting the power.
// Cuts have shown tens; a wider window only lets more lost bytes pass as a
// later write's value by chance (1 in 256 for each later write covering one).
constexpr uint64_t kInFlightWindow = 500;

struct Write {
  Block block;
  Kind kind;
  uint64_t step;
};

struct Lane {
  int64_t acked = -1;    // last acknowledged index
  int64_t durable = -1;  // last index acknowledged persistent, or visible long enough ago
  int64_t issued = -1;   // last index whose issue line came through
  std::vector<Write> writes;
  std::vector<uint64_t> step_last;  // per step: its last index
};

[[noreturn]] void bad_input(const std::string &why) {
  std::fprintf(stderr, "powercut_verify: %s\n", why.c_str());
  std::exit(2);
}

std::vector<uint8_t> read_all(const char *path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_input(std::string("cannot read ") + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s CLIENT_LOG PART0 PART1 [BOUND_MS]\n", argv[0]);
    return 2;
  }
  const bool bounded = argc == 5;
  const uint64_t bound_ms = bounded ? std::strtoull(argv[4], nullptr, 10) : 0;
  std::ifstream log(argv[1]);
  if (!log) bad_input(std::string("cannot read ") + argv[1]);

  uint64_t seed = 0;
  unsigned nlanes = 0;
  bool started = false;
  std::vector<Lane> lanes;
  struct Issued {
    unsigned lane;
    uint64_t index;
    std::string kind;
    size_t off, len;
    unsigned flags;
  };
  std::vector<Issued> issues;
  std::vector<std::pair<unsigned, uint64_t>> acks;
  struct Visible {
    unsigned lane;
    uint64_t index, ms;
  };
  std::vector<Visible> visible;  // visible acknowledgements
  size_t crashed = 0;            // of which before rpmemd was killed
  uint64_t cut_ms = 0;           // the latest ack's time
  std::string line;
  while (std::getline(log, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "start") {
      size_t size = 0;
      if (std::sscanf(line.c_str(), "start seed=%" SCNu64 " lanes=%u size=%zu", &seed, &nlanes,
                      &size) != 3 ||
          nlanes == 0 || nlanes > 256 || size != powercut::kPoolSize)
        bad_input("bad start line: " + line);
      started = true;
      lanes.assign(nlanes, Lane{});
    } else if (!started) {
      continue;
    } else if (word == "issue") {
      Issued is{};
      std::string rest;
      if (!(ls >> is.lane >> is.index >> is.kind >> is.off >> is.len >> is.flags) || (ls >> rest) ||
          is.lane >= nlanes)
        continue;  // a line cut short by the power cut, or console noise
      issues.push_back(is);
      lanes[is.lane].issued = std::max(lanes[is.lane].issued, static_cast<int64_t>(is.index));
    } else if (word == "ack") {
      unsigned lane = 0;
      uint64_t index = 0, ms = 0;
      std::string level, rest;
      if (!(ls >> lane >> index >> level >> ms) || (ls >> rest) || lane >= nlanes ||
          (level != "p" && level != "v"))
        continue;
      // Its issue line came first on the same console.
      if (static_cast<int64_t>(index) > lanes[lane].issued)
        bad_input("ack line before its issue line: " + line);
      acks.emplace_back(lane, index);
      lanes[lane].acked = std::max(lanes[lane].acked, static_cast<int64_t>(index));
      cut_ms = std::max(cut_ms, ms);
      if (level == "p")
        lanes[lane].durable = std::max(lanes[lane].durable, static_cast<int64_t>(index));
      else
        visible.push_back({lane, index, ms});
    } else if (word == "crash") {
      crashed = visible.size();
    } else if (word == "error") {
      bad_input("the client failed: " + line);
    }
  }
  if (!started) bad_input("no start line in the client log");
  // A visible acknowledgement older than the bound is persistent by now,
  // and so is every earlier write of its lane; so is one before a crash.
  uint64_t visible_old = 0;
  for (size_t i = 0; i < visible.size(); ++i) {
    const Visible &v = visible[i];
    if (i >= crashed && (!bounded || cut_ms - v.ms <= bound_ms)) continue;
    ++visible_old;
    lanes[v.lane].durable = std::max(lanes[v.lane].durable, static_cast<int64_t>(v.index));
  }

  // Replay each lane's schedule up to the end of its in-flight window.
  for (unsigned l = 0; l < nlanes; ++l) {
    Lane &lane = lanes[l];
    const uint64_t until =
        static_cast<uint64_t>(std::max(lane.acked, lane.issued) + 1) + kInFlightWindow;
    powercut::LaneSchedule schedule(seed, l, nlanes);
    for (uint64_t step = 0; lane.writes.size() < until; ++step) {
      powercut::Step s = schedule.next();
      if (s.blocks.empty()) continue;
      for (const Block &b : s.blocks) lane.writes.push_back({b, s.kind, step});
      lane.step_last.push_back(s.blocks.back().index);
    }
  }
  for (const Issued &is : issues) {
    const Lane &lane = lanes[is.lane];
    const Write &w = lane.writes.at(is.index);
    if (w.block.index != is.index || is.kind != powercut::kind_name(w.kind) ||
        is.off != w.block.off || is.len != w.block.len || is.flags != w.block.flush_flags)
      bad_input("issue line of lane " + std::to_string(is.lane) + " index " +
                std::to_string(is.index) + " does not match the schedule (another build?)");
  }

  for (const auto &[l, index] : acks) {
    const std::vector<uint64_t> &ends = lanes[l].step_last;
    if (!std::binary_search(ends.begin(), ends.end(), index))
      bad_input("ack of lane " + std::to_string(l) + " index " + std::to_string(index) +
                " is not the end of a step of the schedule");
  }

  // The pool as the client addresses it.
  const std::vector<uint8_t> p0 = read_all(argv[2]), p1 = read_all(argv[3]);
  if (p0.size() < powercut::kPartSize || p1.size() < powercut::kPartSize)
    bad_input("a part file is shorter than 2 MiB");
  std::vector<uint8_t> pool(powercut::kPoolSize);
  std::memcpy(pool.data(), p0.data(), powercut::kBoundary);
  std::memcpy(pool.data() + powercut::kBoundary, p1.data() + powercut::kHdrSize,
              powercut::kPoolSize - powercut::kBoundary);

  // The last durable acknowledged write of every byte (lane, index + 1; 0:
  // none), and the last acknowledged one at any level (young: visible and
  // younger than the bound, or not durable yet).
  std::vector<uint8_t> owner_lane(pool.size());
  std::vector<uint32_t> owner_write(pool.size(), 0), young_write(pool.size(), 0);
  uint64_t acked_blocks = 0, acked_steps = 0, acked_calls = 0;
  for (unsigned l = 0; l < nlanes; ++l) {
    const Lane &lane = lanes[l];
    for (int64_t i = 0; i <= lane.acked; ++i) {
      const Write &w = lane.writes[static_cast<size_t>(i)];
      ++acked_blocks;
      for (size_t x = w.block.off; x < w.block.off + w.block.len; ++x) {
        owner_lane[x] = static_cast<uint8_t>(l);
        if (i <= lane.durable) owner_write[x] = static_cast<uint32_t>(i + 1);
        young_write[x] = i > lane.durable ? static_cast<uint32_t>(i + 1) : 0;
      }
    }
    for (uint64_t last : lane.step_last) {
      if (static_cast<int64_t>(last) > lane.acked) break;
      ++acked_steps;
    }
    // Calls: one per write, plus one drain per acknowledged batch.
    uint64_t prev_step = UINT64_MAX;
    for (int64_t i = 0; i <= lane.acked; ++i) {
      const Write &w = lane.writes[static_cast<size_t>(i)];
      ++acked_calls;
      if (w.kind == Kind::kFlushBatch && w.step != prev_step) ++acked_calls;
      prev_step = w.step;
    }
  }

  uint64_t checked = 0;
  std::vector<uint8_t> lost(pool.size(), 0);
  for (size_t x = 0; x < pool.size(); ++x) {
    if (owner_write[x] == 0) continue;
    ++checked;
    if (pool[x] != Content(seed, owner_lane[x], owner_write[x] - 1).at(x)) lost[x] = 1;
  }
  // A later write of the owner lane may have landed (in part or whole). A
  // lost byte matches some later write's value by chance (1 in 256 per
  // write), so `furthest` counts only writes that explain a run of 16
  // consecutive bytes.
  uint64_t in_flight = 0, furthest = 0;  // furthest: writes past the lane's last ack
  for (unsigned l = 0; l < nlanes; ++l) {
    const Lane &lane = lanes[l];
    for (size_t i = static_cast<size_t>(lane.durable + 1); i < lane.writes.size(); ++i) {
      const Block &b = lane.writes[i].block;
      const Content c(seed, l, b.index);
      uint64_t run = 0, longest = 0;
      for (size_t x = b.off; x < b.off + b.len; ++x) {
        if (lost[x] && owner_lane[x] == l && pool[x] == c.at(x)) {
          lost[x] = 0;
          ++in_flight;
          longest = std::max(longest, ++run);
        } else {
          run = 0;
        }
      }
      if (longest >= 16)
        furthest =
            std::max(furthest, static_cast<uint64_t>(i) - static_cast<uint64_t>(lane.durable));
    }
  }

  // Lost ranges: lost bytes of one write, gaps of up to 16 bytes (chance
  // matches) bridged.
  uint64_t lost_bytes = 0;
  std::set<std::pair<unsigned, uint32_t>> lost_writes;
  struct Range {
    size_t off, len, lost;
    unsigned lane;
    uint32_t write;
  };
  std::vector<Range> ranges;
  for (size_t x = 0; x < pool.size(); ++x) {
    if (!lost[x]) continue;
    ++lost_bytes;
    lost_writes.insert({owner_lane[x], owner_write[x]});
    if (!ranges.empty() && x - (ranges.back().off + ranges.back().len) <= 16 &&
        ranges.back().lane == owner_lane[x] && ranges.back().write == owner_write[x]) {
      ranges.back().len = x + 1 - ranges.back().off;
      ++ranges.back().lost;
    } else {
      ranges.push_back({x, 1, 1, owner_lane[x], owner_write[x]});
    }
  }
  std::printf(
      "powercut_verify: %u lanes, acknowledged: %" PRIu64 " calls (%" PRIu64 " steps, %" PRIu64
      " blocks written); checked %" PRIu64 " bytes (%zu blocks still current), %" PRIu64
      " of them from writes in flight (up to %" PRIu64 " past an ack); lost %" PRIu64
      " bytes in %zu blocks (%zu ranges)\n",
      nlanes, acked_calls, acked_steps, acked_blocks, checked,
      [&] {
        std::set<std::pair<unsigned, uint32_t>> current;
        for (size_t x = 0; x < pool.size(); ++x)
          if (owner_write[x]) current.insert({owner_lane[x], owner_write[x]});
        return current.size();
      }(),
      in_flight, furthest, lost_bytes, lost_writes.size(), ranges.size());
  if (!visible.empty()) {
    uint64_t young = 0, intact = 0;
    for (size_t x = 0; x < pool.size(); ++x) {
      if (young_write[x] == 0) continue;
      ++young;
      intact += pool[x] == Content(seed, owner_lane[x], young_write[x] - 1).at(x);
    }
    std::printf("  visible acknowledgements: %zu, %" PRIu64 " older than %" PRIu64
                " ms at the cut or before a crash (%zu; checked as persistent); of the bytes"
                " only younger ones acknowledged, %" PRIu64 " of %" PRIu64 " survived\n",
                visible.size(), visible_old, bound_ms, crashed, intact, young);
  }
  if (lost_bytes != 0) {
    uint64_t by_kind[4] = {}, blocks_by_kind[4] = {};
    for (size_t x = 0; x < pool.size(); ++x)
      if (lost[x])
        ++by_kind[static_cast<int>(lanes[owner_lane[x]].writes[owner_write[x] - 1].kind)];
    for (const auto &[l, w] : lost_writes)
      ++blocks_by_kind[static_cast<int>(lanes[l].writes[w - 1].kind)];
    std::printf("  lost by call:");
    for (Kind k : {Kind::kPersist, Kind::kPersistRelaxed, Kind::kDeepPersist, Kind::kFlushBatch})
      std::printf(" %s %" PRIu64 " bytes/%" PRIu64 " blocks;", powercut::kind_name(k),
                  by_kind[static_cast<int>(k)], blocks_by_kind[static_cast<int>(k)]);
    std::printf("\n");
  }
  size_t shown = 0;
  for (const Range &r : ranges) {
    if (shown++ == 10) {
      std::printf("  ...\n");
      break;
    }
    const Write &w = lanes[r.lane].writes[r.write - 1];
    unsigned part = 0;
    size_t file_off = 0;
    powercut::part_of(r.off, &part, &file_off);
    bool zeros = true;
    for (size_t x = r.off; x < r.off + r.len; ++x) zeros &= !lost[x] || pool[x] == 0;
    std::printf(
        "  lost %zu bytes of [%zu, +%zu) (part %u at %zu): lane %u write %u (%s [%zu, +%zu)%s)%s\n",
        r.lost, r.off, r.len, part, file_off, r.lane, r.write - 1, powercut::kind_name(w.kind),
        w.block.off, w.block.len,
        w.kind == Kind::kFlushBatch ? (w.block.flush_flags ? " relaxed" : " flags 0") : "",
        zeros ? ", zeros on the disk" : "");
  }
  return lost_bytes == 0 ? 0 : 1;
}
