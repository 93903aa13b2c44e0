// SPDX-License-Identifier: BSD-3-Clause
// rpmem-bench's command line.
#include "tools/rpmem-bench/bench.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace rpmem_bench {
namespace {

constexpr const char *kUsage = R"(usage: rpmem-bench [options]

Measures librpmem.so.1 through its public API (any implementation of it),
and, in the same run, what plain TCP on loopback does for the same sizes.

The target and pool set:
  -t, --target HOST       [user@]host[:port] of the target (default 127.0.0.1);
                          the daemon is started as librpmem does it
                          (RPMEM_SSH, RPMEM_CMD)
  -P, --pool-set NAME     pool set on the target (default bench.set); created,
                          or opened if it already holds a pool
  -S, --pool-size SIZE    bytes of the pool to use (default 64M); the pool
                          set must be at least this large
      --remove            remove the pool at the end (if this run created it)

What to measure:
  -o, --ops LIST          persist, relaxed (persist with RPMEM_PERSIST_RELAXED),
                          deep (rpmem_deep_persist), flush (BATCH x rpmem_flush
                          then rpmem_drain), read, visible (persist with
                          RPMEM_PERSIST_VISIBLE: acknowledged once in the
                          target's memory, against raw-rr), or all
                          (default persist,relaxed,deep,flush,read)
  -b, --sizes LIST        block sizes, with K/M/G suffixes
                          (default 64,4K,64K,1M)
  -l, --lanes LIST        lane counts; one thread per lane (default 1)
  -B, --batch N           flushes per drain (default 16)
  -d, --duration SEC      measured time per case and run (default 2)
  -n, --count N           calls per lane instead of a duration
  -w, --warmup SEC        unmeasured calls before each case (default 0.2)
      --start-at TIME     the first case's measured time starts at TIME
                          (seconds since the epoch, wall clock), not after
                          its warm-up: unmeasured calls until then; an error
                          if the case is ready only later. For many
                          processes measured over one window
  -r, --repeat N          runs of every case, interleaved; the figures are
                          the medians of the runs (default 1)
      --wide-lanes N      also open a second pool (--wide-pool-set) asking for N
                          lanes, and measure persist on its lane 0 only
                          (persist-wide, compared with 1-lane persist)
      --wide-pool-set NAME  its pool set (default bench-wide.set, 8M used)
      --data-tls          also open a third pool (--tls-pool-set, as large as
                          --pool-size) with RPMEM_DATA_TLS=1, and measure
                          persist and read on it (persist-tls, read-tls,
                          compared with cleartext persist and read); says
                          which TLS record layer ran (kernel or user space);
                          and raw-seal: AES-128-GCM seal and open of SIZE
                          bytes in 64 KiB frames, in this process
      --tls-pool-set NAME its pool set (default bench-tls.set)
                          and a fourth (--sealed-pool-set) with sealed lanes
                          (RPMEM_DATA_SEAL=1; the third has 0): persist-sealed,
                          read-sealed
      --sealed-pool-set NAME  its pool set (default bench-sealed.set)
      --raw-only          only the raw cases
      --no-raw            no raw cases
      --raw-disk DIR      also measure raw-dsync: pwrite of SIZE bytes on an
                          O_DSYNC file in DIR, one writer per lane, at the
                          offsets persist uses, in a file of --pool-size
                          bytes allocated as rpmemd allocates a part; DIR
                          should be on the file system of the pool, and
                          persists are then compared with it

Output (stdout):
  -f, --format FMT        table (default), csv or json
      --progress / --no-progress
                          a progress line on stderr (default: if a terminal)
  -h, --help              this text

Each case prints latency percentiles (per call; per batch for flush),
calls/s and MB/s (size-byte writes or reads; 1 MB = 10^6 bytes), and its
ratio to the raw equivalent of the same size and lanes: below 64 KiB the p50
over the p50 of a raw request/response (a SIZE-byte request, a 16-byte
reply; raw-rr waits as rpmem's TCP transport does, spinning for up to 20 us
before it sleeps in poll, on both sides; raw-rr-block blocks in recv and is
shown for reference), from 64 KiB up the MB/s over a raw TCP stream written in SIZE-byte
pieces; with --raw-disk, persists (and relaxed and deep ones) compare their
calls/s with raw-dsync's; flush batches compare their MB/s with persist's. With more than one
lane count, the table ends with each case's calls/s at every count and the
ratio of each count to the one before it (lane scaling).
The table ends with each case's CPU time per call: this process's and that of
the daemons it started (their threads' schedstat). With --data-tls, from 64
KiB up, each encrypted case is also set against the limit of this machine,
size / ((cleartext's CPU per call + raw-seal's) / CPUs), as both ends share
the CPUs on one machine.

Example, with the local daemon of tools/rpmem-bench/run-local.sh:
  tools/rpmem-bench/run-local.sh build -b 64,4K,1M -l 1,2 -r 3
)";

[[noreturn]] void usage_error(const char *fmt, const char *arg) {
  std::fprintf(stderr, "rpmem-bench: ");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr, "\n(rpmem-bench --help for the options)\n");
  std::exit(2);
}

uint64_t parse_size(const std::string &s) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || s[0] == '-') usage_error("bad size '%s'", s.c_str());
  std::string suffix(end);
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    shift = 30;
  else if (!suffix.empty() && suffix != "B")
    usage_error("bad size '%s'", s.c_str());
  if (v == 0 || v > (~0ull >> shift)) usage_error("bad size '%s'", s.c_str());
  return v << shift;
}

std::vector<std::string> split(const char *arg) {
  std::vector<std::string> out;
  std::stringstream ss(arg);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  if (out.empty()) usage_error("empty list '%s'", arg);
  return out;
}

std::vector<Op> parse_ops(const char *arg) {
  std::vector<Op> ops;
  for (const auto &s : split(arg)) {
    if (s == "all")
      ops.insert(ops.end(),
                 {Op::kPersist, Op::kPersistRelaxed, Op::kDeepPersist, Op::kFlushDrain, Op::kRead});
    else if (s == "persist")
      ops.push_back(Op::kPersist);
    else if (s == "relaxed")
      ops.push_back(Op::kPersistRelaxed);
    else if (s == "visible")
      ops.push_back(Op::kPersistVisible);
    else if (s == "deep")
      ops.push_back(Op::kDeepPersist);
    else if (s == "flush")
      ops.push_back(Op::kFlushDrain);
    else if (s == "read")
      ops.push_back(Op::kRead);
    else
      usage_error("unknown operation '%s'", s.c_str());
  }
  return ops;
}

double parse_seconds(const char *arg) {
  char *end = nullptr;
  double v = std::strtod(arg, &end);
  if (end == arg || *end || !(v >= 0) || v > 86400) usage_error("bad number of seconds '%s'", arg);
  return v;
}

uint64_t parse_count(const char *arg, uint64_t max) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(arg, &end, 10);
  if (errno || end == arg || *end || arg[0] == '-' || v == 0 || v > max)
    usage_error("bad number '%s'", arg);
  return v;
}

}  // namespace

Options parse_options(int argc, char **argv) {
  enum {
    kRemove = 256,
    kRawOnly,
    kNoRaw,
    kRawDisk,
    kProgress,
    kNoProgress,
    kWideLanes,
    kWidePoolSet,
    kDataTls,
    kTlsPoolSet,
    kSealedPoolSet,
    kStartAt
  };
  static const option longopts[] = {
      {"target", required_argument, nullptr, 't'},
      {"pool-set", required_argument, nullptr, 'P'},
      {"pool-size", required_argument, nullptr, 'S'},
      {"remove", no_argument, nullptr, kRemove},
      {"ops", required_argument, nullptr, 'o'},
      {"sizes", required_argument, nullptr, 'b'},
      {"lanes", required_argument, nullptr, 'l'},
      {"batch", required_argument, nullptr, 'B'},
      {"duration", required_argument, nullptr, 'd'},
      {"count", required_argument, nullptr, 'n'},
      {"warmup", required_argument, nullptr, 'w'},
      {"repeat", required_argument, nullptr, 'r'},
      {"start-at", required_argument, nullptr, kStartAt},
      {"wide-lanes", required_argument, nullptr, kWideLanes},
      {"wide-pool-set", required_argument, nullptr, kWidePoolSet},
      {"data-tls", no_argument, nullptr, kDataTls},
      {"tls-pool-set", required_argument, nullptr, kTlsPoolSet},
      {"sealed-pool-set", required_argument, nullptr, kSealedPoolSet},
      {"raw-only", no_argument, nullptr, kRawOnly},
      {"no-raw", no_argument, nullptr, kNoRaw},
      {"raw-disk", required_argument, nullptr, kRawDisk},
      {"format", required_argument, nullptr, 'f'},
      {"progress", no_argument, nullptr, kProgress},
      {"no-progress", no_argument, nullptr, kNoProgress},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  Options o;
  int c;
  while ((c = getopt_long(argc, argv, "t:P:S:o:b:l:B:d:n:w:r:f:h", longopts, nullptr)) != -1) {
    switch (c) {
      case 't':
        o.target = optarg;
        break;
      case 'P':
        o.pool_set = optarg;
        break;
      case 'S':
        o.pool_size = parse_size(optarg);
        break;
      case kRemove:
        o.remove = true;
        break;
      case 'o':
        o.ops = parse_ops(optarg);
        break;
      case 'b':
        o.sizes.clear();
        for (const auto &s : split(optarg)) o.sizes.push_back(parse_size(s));
        break;
      case 'l':
        o.lanes.clear();
        for (const auto &s : split(optarg))
          o.lanes.push_back(static_cast<unsigned>(parse_count(s.c_str(), 1024)));
        break;
      case 'B':
        o.batch = static_cast<unsigned>(parse_count(optarg, 1u << 20));
        break;
      case 'd':
        o.duration_s = parse_seconds(optarg);
        break;
      case 'n':
        o.count = parse_count(optarg, uint64_t{1} << 40);
        break;
      case 'w':
        o.warmup_s = parse_seconds(optarg);
        break;
      case 'r':
        o.repeat = static_cast<unsigned>(parse_count(optarg, 1000));
        break;
      case kStartAt: {
        char *end = nullptr;
        o.start_at = std::strtod(optarg, &end);
        if (end == optarg || *end || !(o.start_at > 0)) usage_error("bad time '%s'", optarg);
        break;
      }
      case kWideLanes:
        o.wide_lanes = static_cast<unsigned>(parse_count(optarg, 65536));
        break;
      case kWidePoolSet:
        o.wide_pool_set = optarg;
        break;
      case kDataTls:
        o.data_tls = true;
        break;
      case kTlsPoolSet:
        o.tls_pool_set = optarg;
        break;
      case kSealedPoolSet:
        o.sealed_pool_set = optarg;
        break;
      case kRawOnly:
        o.rpmem = false, o.raw = true;
        break;
      case kNoRaw:
        o.raw = false, o.rpmem = true;
        break;
      case kRawDisk:
        o.raw_disk = optarg;
        break;
      case 'f':
        if (!std::strcmp(optarg, "table"))
          o.format = Format::kTable;
        else if (!std::strcmp(optarg, "csv"))
          o.format = Format::kCsv;
        else if (!std::strcmp(optarg, "json"))
          o.format = Format::kJson;
        else
          usage_error("unknown format '%s'", optarg);
        break;
      case kProgress:
        o.progress = 1;
        break;
      case kNoProgress:
        o.progress = 0;
        break;
      case 'h':
        std::fputs(kUsage, stdout);
        std::exit(0);
      default:
        std::fprintf(stderr, "(rpmem-bench --help for the options)\n");
        std::exit(2);
    }
  }
  if (optind < argc) usage_error("unexpected argument '%s'", argv[optind]);
  if (o.duration_s <= 0 && !o.count) usage_error("%s", "the duration must be above 0");
  return o;
}

}  // namespace rpmem_bench
