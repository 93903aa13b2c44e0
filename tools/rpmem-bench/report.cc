// SPDX-License-Identifier: BSD-3-Clause
// Turns the runs of each case into figures and prints them as a table, CSV or JSON.
#include "tools/rpmem-bench/report.h"

#include "common/json_escape.h"
#include "tools/rpmem-bench/runner.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace rpmem_bench {
namespace {

constexpr size_t kStreamFrom = 64 * 1024;  // from here on, compare throughput

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Nearest-rank percentile of sorted samples, in microseconds.
double pct_us(const std::vector<uint32_t> &sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1] / 1000.0;
}

std::string size_text(size_t s) {
  if (s >= (size_t{1} << 30) && s % (size_t{1} << 30) == 0) return std::to_string(s >> 30) + " GiB";
  if (s >= (size_t{1} << 20) && s % (size_t{1} << 20) == 0) return std::to_string(s >> 20) + " MiB";
  if (s >= 1024 && s % 1024 == 0) return std::to_string(s >> 10) + " KiB";
  return std::to_string(s) + " B";
}

// What a case is compared with, and how.
struct Baseline {
  const Result *base = nullptr;
  bool by_latency = false;  // p50 over the base's p50; otherwise MB/s over the base's MB/s
  const char *name = "";
};

const Result *find(const std::vector<Result> &rs, Op op, size_t size, unsigned lanes) {
  for (const auto &r : rs)
    if (r.c.op == op && r.c.size == size && r.c.lanes == lanes && !r.error) return &r;
  return nullptr;
}

// The cleartext operation an encrypted case is set against (same size and
// lanes, same run); none for other cases.
std::optional<Op> cleartext_op(Op op) {
  if (op == Op::kPersistTls || op == Op::kPersistSealed) return Op::kPersist;
  if (op == Op::kReadTls || op == Op::kReadSealed) return Op::kRead;
  return std::nullopt;
}

Baseline baseline_of(const Result &r, const std::vector<Result> &rs) {
  Baseline b;
  if (is_raw(r.c.op)) return b;
  if (r.c.op == Op::kFlushDrain) {
    b.base = find(rs, Op::kPersist, r.c.size, r.c.lanes);
    b.name = "persist";
  } else if (const auto clear = cleartext_op(r.c.op)) {
    // Encrypted lanes against cleartext lanes, same size and lanes, same run.
    b.base = find(rs, *clear, r.c.size, r.c.lanes);
    b.by_latency = r.c.size < kStreamFrom;
    b.name = op_name(*clear);
  } else if (r.c.op == Op::kPersistWide) {
    b.base = find(rs, Op::kPersist, r.c.size, 1);
    b.by_latency = true;
    b.name = "persist 1-lane";
  } else if ((r.c.op == Op::kPersist || r.c.op == Op::kPersistRelaxed ||
              r.c.op == Op::kDeepPersist) &&
             find(rs, Op::kRawDsync, r.c.size, r.c.lanes)) {
    b.base = find(rs, Op::kRawDsync, r.c.size, r.c.lanes);  // a pool on a disk
    b.name = "raw dsync";
  } else if (r.c.size < kStreamFrom) {
    b.base = find(rs, Op::kRawRr, r.c.size, r.c.lanes);
    b.by_latency = true;
    b.name = "raw rr";
  } else {
    b.base = find(rs, Op::kRawStream, r.c.size, r.c.lanes);
    b.name = "raw stream";
  }
  return b;
}

double ratio(const Result &r, const Baseline &b) {
  if (!b.base) return 0;
  if (b.by_latency) return b.base->p50_us > 0 ? r.p50_us / b.base->p50_us : 0;
  return b.base->mb_s > 0 ? r.mb_s / b.base->mb_s : 0;
}

double ratio_to(const Result &r, const std::vector<Result> &rs, Op op, bool latency) {
  const Result *b = find(rs, op, r.c.size, r.c.lanes);
  if (!b || is_raw(r.c.op)) return 0;
  if (latency) return b->p50_us > 0 ? r.p50_us / b->p50_us : 0;
  return b->mb_s > 0 ? r.mb_s / b->mb_s : 0;
}

// What the machine allows encrypted lanes of `r`'s size (from 64 KiB up,
// where throughput is compared), in MB/s: cleartext's CPU per call (this
// process and the daemon) plus one seal and one open of the size (raw-seal),
// spread over the CPUs, which both ends share on one machine:
//   limit = size / ((C + S) / cpus).
// 0 when this run has no such figures.
double limit_mb_s(const Result &r, const std::vector<Result> &rs, unsigned cpus) {
  const auto clear_op = cleartext_op(r.c.op);
  if (!clear_op || r.c.size < kStreamFrom || cpus == 0) return 0;
  const Result *clear = find(rs, *clear_op, r.c.size, r.c.lanes);
  const Result *seal = find(rs, Op::kRawSeal, r.c.size, 1);
  if (!clear || !seal || clear->cpu_us <= 0 || seal->cpu_us <= 0) return 0;
  const double us = (clear->cpu_us + clear->daemon_cpu_us + seal->cpu_us) / cpus;
  return static_cast<double>(r.c.size) / us;
}

double limit_ratio(const Result &r, const std::vector<Result> &rs, unsigned cpus) {
  const double limit = limit_mb_s(r, rs, cpus);
  return limit > 0 ? r.mb_s / limit : 0;
}

// CPU per call of every case, and the encrypted lanes against the limit.
void print_cpu(std::FILE *out, const RunInfo &info, const std::vector<Result> &rs) {
  std::fprintf(out,
               "\nCPU per call (us): this process, and the daemons it started; encrypted lanes "
               "from 64 KiB against the\nlimit = size / ((cleartext's CPU per call + raw-seal's) "
               "/ %u CPUs)\n%-16s %8s %5s %9s %9s %9s %11s %s\n",
               info.cpus, "case", "size", "lanes", "client", "daemon", "total", "limit MB/s",
               "MB/s over limit");
  for (const auto &r : rs) {
    if (r.error) continue;
    std::fprintf(out, "%-16s %8s %5u %9.1f %9.1f %9.1f", op_name(r.c.op),
                 size_text(r.c.size).c_str(), r.c.lanes, r.cpu_us, r.daemon_cpu_us,
                 r.cpu_us + r.daemon_cpu_us);
    if (const double limit = limit_mb_s(r, rs, info.cpus); limit > 0)
      std::fprintf(out, " %11.1f %.2fx", limit, r.mb_s / limit);
    std::fprintf(out, "\n");
  }
}

using rpmem::json_escape;

// The ratio of b's calls/s to a's: the median of the ratios of runs with the
// same number (the cases are interleaved, so run k of both ran at about the
// same time, which cancels much of a shared machine's drift), and how many of
// those runs had b below a.
struct Step {
  double ratio = 0;
  size_t below = 0, runs = 0;
};

Step step_of(const Result &a, const Result &b) {
  Step s;
  std::vector<double> ratios;
  for (size_t k = 0; k < std::min(a.run_ops_s.size(), b.run_ops_s.size()); ++k) {
    if (a.run_ops_s[k] <= 0) continue;
    ratios.push_back(b.run_ops_s[k] / a.run_ops_s[k]);
    if (ratios.back() < 1) ++s.below;
  }
  s.runs = ratios.size();
  s.ratio = median(ratios);
  return s;
}

// With more than one lane count: the aggregate calls/s of every case at each
// lane count, and each count over the one before it (the raw cases show what
// the machine's TCP itself does with more connections).
void print_scaling(std::FILE *out, const std::vector<Result> &rs) {
  std::vector<unsigned> lanes;
  for (const auto &r : rs)
    if (std::find(lanes.begin(), lanes.end(), r.c.lanes) == lanes.end()) lanes.push_back(r.c.lanes);
  if (lanes.size() < 2) return;
  std::sort(lanes.begin(), lanes.end());
  std::fprintf(out,
               "\nlane scaling: calls/s; each lane count over the one before it (median of the "
               "runs' ratios, [runs below 1])\n%-25s",
               "case");
  for (unsigned l : lanes) {
    char head[24];
    std::snprintf(head, sizeof(head), "%u lane%s", l, l == 1 ? "" : "s");
    std::fprintf(out, " %9s", head);
  }
  for (size_t i = 1; i < lanes.size(); ++i) {
    char head[24];
    std::snprintf(head, sizeof(head), "%u/%u", lanes[i], lanes[i - 1]);
    std::fprintf(out, i + 1 < lanes.size() ? " %-11s" : " %s", head);
  }
  std::fprintf(out, "\n");
  std::vector<std::pair<Op, size_t>> done;
  for (const auto &first : rs) {
    const std::pair<Op, size_t> key{first.c.op, first.c.size};
    if (std::find(done.begin(), done.end(), key) != done.end()) continue;
    done.push_back(key);
    std::fprintf(out, "%-16s %8s", op_name(key.first), size_text(key.second).c_str());
    std::vector<const Result *> row;
    for (unsigned l : lanes) {
      row.push_back(find(rs, key.first, key.second, l));
      if (row.back())
        std::fprintf(out, " %9.0f", row.back()->ops_s);
      else
        std::fprintf(out, " %9s", "-");
    }
    for (size_t i = 1; i < row.size(); ++i) {
      char cell[32] = "-";
      if (row[i] && row[i - 1]) {
        const Step s = step_of(*row[i - 1], *row[i]);
        if (s.runs) std::snprintf(cell, sizeof(cell), "%.2f [%zu/%zu]", s.ratio, s.below, s.runs);
      }
      std::fprintf(out, i + 1 < row.size() ? " %-11s" : " %s", cell);
    }
    std::fprintf(out, "\n");
  }
}

void print_table(std::FILE *out, const RunInfo &info, const std::vector<Result> &rs) {
  std::fprintf(out, "# %s\n# library  %s\n# machine  %s\n# pool     %s\n# date     %s\n",
               info.command.c_str(), info.library.c_str(), info.machine.c_str(), info.pool.c_str(),
               info.date.c_str());
  std::fprintf(out, "%-16s %8s %5s %9s %9s %9s %10s %9s %7s  %-24s %s\n", "case", "size", "lanes",
               "p50 us", "p99 us", "p99.9 us", "calls/s", "MB/s", "alloc/c", "raw equivalent",
               "ratio");
  for (const auto &r : rs) {
    std::fprintf(out, "%-16s %8s %5u ", op_name(r.c.op), size_text(r.c.size).c_str(), r.c.lanes);
    if (r.error) {
      std::fprintf(out, " failed: %s\n", r.error_text.c_str());
      continue;
    }
    char alloc[16] = "-";
    if (r.allocs_per_op >= 0) std::snprintf(alloc, sizeof(alloc), "%.2f", r.allocs_per_op);
    std::fprintf(out, "%9.1f %9.1f %9.1f %10.0f %9.1f %7s", r.p50_us, r.p99_us, r.p999_us, r.ops_s,
                 r.mb_s, alloc);
    Baseline b = baseline_of(r, rs);
    if (b.base) {
      char what[64];
      if (b.by_latency)
        std::snprintf(what, sizeof(what), "%s p50 %.1f us", b.name, b.base->p50_us);
      else
        std::snprintf(what, sizeof(what), "%s %.1f MB/s", b.name, b.base->mb_s);
      std::fprintf(out, "  %-24s %.2fx %s", what, ratio(r, b), b.by_latency ? "p50" : "MB/s");
    }
    std::fprintf(out, "\n");
  }
  print_scaling(out, rs);
  print_cpu(out, info, rs);
}

void print_csv(std::FILE *out, const std::vector<Result> &rs, unsigned cpus) {
  std::fprintf(out,
               "case,size,lanes,p50_us,p99_us,p999_us,ops_per_s,mb_per_s,calls,allocs_per_call,"
               "p50_over_raw_rr_p50,mbps_over_raw_stream,mbps_over_persist,error,"
               "p50_over_raw_rr_block_p50,p50_over_persist_1lane_p50,cpu_us_per_call,"
               "daemon_cpu_us_per_call,mbps_over_limit\n");
  for (const auto &r : rs) {
    const Result *one = find(rs, Op::kPersist, r.c.size, 1);
    double wide = r.c.op == Op::kPersistWide && one && one->p50_us > 0 ? r.p50_us / one->p50_us : 0;
    std::fprintf(
        out,
        "%s,%zu,%u,%.2f,%.2f,%.2f,%.1f,%.2f,%llu,%.3f,%.3f,%.3f,%.3f,%s,%.3f,%.3f,%.2f,%.2f,"
        "%.3f\n",
        op_name(r.c.op), r.c.size, r.c.lanes, r.p50_us, r.p99_us, r.p999_us, r.ops_s, r.mb_s,
        static_cast<unsigned long long>(r.ops), r.allocs_per_op, ratio_to(r, rs, Op::kRawRr, true),
        ratio_to(r, rs, Op::kRawStream, false),
        r.c.op == Op::kFlushDrain ? ratio_to(r, rs, Op::kPersist, false) : 0.0,
        r.error_text.c_str(), ratio_to(r, rs, Op::kRawRrBlock, true), wide, r.cpu_us,
        r.daemon_cpu_us, limit_ratio(r, rs, cpus));
  }
}

void print_json(std::FILE *out, const RunInfo &info, const std::vector<Result> &rs) {
  std::fprintf(out,
               "{\n  \"command\": \"%s\",\n  \"library\": \"%s\",\n  \"machine\": \"%s\",\n"
               "  \"pool\": \"%s\",\n  \"date\": \"%s\",\n  \"results\": [",
               json_escape(info.command).c_str(), json_escape(info.library).c_str(),
               json_escape(info.machine).c_str(), json_escape(info.pool).c_str(),
               json_escape(info.date).c_str());
  for (size_t i = 0; i < rs.size(); ++i) {
    const auto &r = rs[i];
    std::fprintf(out,
                 "%s\n    {\"case\": \"%s\", \"size\": %zu, \"lanes\": %u, \"p50_us\": %.2f, "
                 "\"p99_us\": %.2f, \"p999_us\": %.2f, \"ops_per_s\": %.1f, \"mb_per_s\": %.2f, "
                 "\"calls\": %llu, \"allocs_per_call\": %.3f, \"p50_over_raw_rr_p50\": %.3f, "
                 "\"mbps_over_raw_stream\": %.3f, \"mbps_over_persist\": %.3f, "
                 "\"cpu_us_per_call\": %.2f, \"daemon_cpu_us_per_call\": %.2f, "
                 "\"limit_mb_per_s\": %.2f, \"mbps_over_limit\": %.3f",
                 i ? "," : "", op_name(r.c.op), r.c.size, r.c.lanes, r.p50_us, r.p99_us, r.p999_us,
                 r.ops_s, r.mb_s, static_cast<unsigned long long>(r.ops), r.allocs_per_op,
                 ratio_to(r, rs, Op::kRawRr, true), ratio_to(r, rs, Op::kRawStream, false),
                 r.c.op == Op::kFlushDrain ? ratio_to(r, rs, Op::kPersist, false) : 0.0, r.cpu_us,
                 r.daemon_cpu_us, limit_mb_s(r, rs, info.cpus), limit_ratio(r, rs, info.cpus));
    if (r.error) std::fprintf(out, ", \"error\": \"%s\"", json_escape(r.error_text).c_str());
    std::fprintf(out, "}");
  }
  std::fprintf(out, "\n  ]\n}\n");
}

}  // namespace

const char *op_name(Op op) {
  switch (op) {
    case Op::kPersist:
      return "persist";
    case Op::kPersistRelaxed:
      return "persist-relaxed";
    case Op::kPersistVisible:
      return "persist-visible";
    case Op::kDeepPersist:
      return "deep-persist";
    case Op::kFlushDrain:
      return "flush+drain";
    case Op::kRead:
      return "read";
    case Op::kPersistWide:
      return "persist-wide";
    case Op::kPersistTls:
      return "persist-tls";
    case Op::kReadTls:
      return "read-tls";
    case Op::kPersistSealed:
      return "persist-sealed";
    case Op::kReadSealed:
      return "read-sealed";
    case Op::kRawRr:
      return "raw-rr";
    case Op::kRawRrBlock:
      return "raw-rr-block";
    case Op::kRawStream:
      return "raw-stream";
    case Op::kRawSeal:
      return "raw-seal";
    case Op::kRawDsync:
      return "raw-dsync";
  }
  return "?";
}

bool is_raw(Op op) {
  return op == Op::kRawRr || op == Op::kRawRrBlock || op == Op::kRawStream || op == Op::kRawDsync ||
         op == Op::kRawSeal;
}

Result summarize(const Case &c, std::vector<RunSamples> &runs) {
  Result r;
  r.c = c;
  std::vector<double> p50, p99, p999, ops_s, mb_s, cpu, daemon_cpu;
  uint64_t calls = 0, allocs = 0;
  for (auto &run : runs) {
    if (run.error) {
      r.error = run.error;
      r.error_text = run.error_text;
      return r;
    }
    std::vector<uint32_t> all;
    for (auto &lane : run.lat_ns) all.insert(all.end(), lane.begin(), lane.end());
    std::sort(all.begin(), all.end());
    p50.push_back(pct_us(all, 50));
    p99.push_back(pct_us(all, 99));
    p999.push_back(pct_us(all, 99.9));
    double secs = run.seconds > 0 ? run.seconds : 1e-9;
    ops_s.push_back(static_cast<double>(run.ops) / secs);
    mb_s.push_back(static_cast<double>(run.ops) * static_cast<double>(c.size) / secs / 1e6);
    if (!all.empty()) {
      cpu.push_back(run.cpu_s * 1e6 / static_cast<double>(all.size()));
      daemon_cpu.push_back(run.daemon_cpu_s * 1e6 / static_cast<double>(all.size()));
    }
    r.ops += run.ops;
    calls += all.size();
    allocs += run.allocs;
  }
  r.p50_us = median(p50);
  r.p99_us = median(p99);
  r.p999_us = median(p999);
  r.ops_s = median(ops_s);
  r.run_ops_s = ops_s;
  r.mb_s = median(mb_s);
  r.cpu_us = median(cpu);
  r.daemon_cpu_us = median(daemon_cpu);
  if (!is_raw(c.op) && thread_allocs() >= 0)
    r.allocs_per_op = calls ? static_cast<double>(allocs) / static_cast<double>(calls) : 0;
  return r;
}

void print(std::FILE *out, Format f, const RunInfo &info, const std::vector<Result> &results) {
  switch (f) {
    case Format::kTable:
      print_table(out, info, results);
      break;
    case Format::kCsv:
      print_csv(out, results, info.cpus);
      break;
    case Format::kJson:
      print_json(out, info, results);
      break;
  }
}

}  // namespace rpmem_bench
