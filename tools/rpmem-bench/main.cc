// SPDX-License-Identifier: BSD-3-Clause
// rpmem-bench: latency and throughput of librpmem.so.1 next to raw TCP on the same machine.
#include "tools/rpmem-bench/bench.h"
#include "tools/rpmem-bench/raw.h"
#include "tools/rpmem-bench/remote_pool.h"
#include "tools/rpmem-bench/report.h"
#include "tools/rpmem-bench/runner.h"

#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

namespace rpmem_bench {
namespace {

std::string case_label(const Case &c, unsigned rep, unsigned reps) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s %zu B x%u [run %u/%u]", op_name(c.op), c.size, c.lanes,
                rep + 1, reps);
  return buf;
}

std::string machine_facts() {
  std::string cpu = "?";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname u{};
  ::uname(&u);
  return cpu + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs, " + u.sysname +
         " " + u.release;
}

std::string library_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void *>(&rpmem_persist), &info) && info.dli_fname)
    return info.dli_fname;
  return "?";
}

// Whether the kernel has kernel TLS, probed as librpmem probes it: TCP_ULP
// "tls" on an unconnected socket fails with ENOTCONN when the kernel has
// the module, ENOENT when it has not.
std::string kernel_tls_text() {
#ifndef TCP_ULP
  constexpr int TCP_ULP = 31;
#endif
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "?";
  const int rc = ::setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls"));
  const int err = errno;
  ::close(fd);
  if (rc == 0 || err == ENOTCONN) return "this kernel has kernel TLS (TCP_ULP \"tls\")";
  return std::string("this kernel has no kernel TLS (setsockopt(TCP_ULP, \"tls\"): ") +
         std::strerror(err) + ")";
}

// With --data-tls, librpmem logs what carries the records of its lanes
// ("data lanes: TLSv1.3, <suite>, user-space TLS"); the bench has it log
// to a file of its own, unless RPMEM_LOG_LEVEL is set already.
struct LibraryLog {
  std::string path;
  void start() {
    if (std::getenv("RPMEM_LOG_LEVEL")) return;
    char tmpl[] = "/tmp/rpmem-bench-log.XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd < 0) return;
    ::close(fd);
    path = tmpl;
    ::setenv("RPMEM_LOG_LEVEL", "4", 1);
    ::setenv("RPMEM_LOG_FILE", path.c_str(), 1);
  }
  std::string lanes_line() const {
    if (path.empty()) return "(set by RPMEM_LOG_LEVEL=4 and RPMEM_LOG_FILE)";
    std::ifstream in(path);
    std::string found;
    for (std::string line; std::getline(in, line);) {
      auto at = line.find("data lanes: ");
      if (at != std::string::npos) found = line.substr(at + 12);
    }
    return found.empty() ? "(not logged)" : found;
  }
  ~LibraryLog() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

std::vector<Case> plan(const Options &opt) {
  std::vector<Case> cases;
  for (unsigned lanes : opt.lanes) {
    for (size_t size : opt.sizes) {
      if (opt.raw) {
        cases.push_back({Op::kRawRr, size, lanes});
        cases.push_back({Op::kRawRrBlock, size, lanes});
        cases.push_back({Op::kRawStream, size, lanes});
        if (!opt.raw_disk.empty()) cases.push_back({Op::kRawDsync, size, lanes});
        if (opt.data_tls) cases.push_back({Op::kRawSeal, size, lanes});
      }
      if (opt.rpmem) {
        for (Op op : opt.ops) cases.push_back({op, size, lanes});
        // One lane in use of the wide pool, next to the cases of the first
        // lane count.
        if (opt.wide_lanes && lanes == opt.lanes.front())
          cases.push_back({Op::kPersistWide, size, 1});
        if (opt.data_tls) {
          for (Op op : opt.ops) {
            if (op == Op::kPersist) {
              cases.push_back({Op::kPersistTls, size, lanes});
              cases.push_back({Op::kPersistSealed, size, lanes});
            }
            if (op == Op::kRead) {
              cases.push_back({Op::kReadTls, size, lanes});
              cases.push_back({Op::kReadSealed, size, lanes});
            }
          }
        }
      }
    }
  }
  return cases;
}

int run(int argc, char **argv) {
  Options opt = parse_options(argc, argv);
  RunInfo info;
  for (int i = 0; i < argc; ++i) info.command += (i ? " " : "") + std::string(argv[i]);
  info.library = library_path();
  info.machine = machine_facts();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) info.cpus = std::max(1, CPU_COUNT(&set));
  char date[64];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  info.date = date;

  std::unique_ptr<RawServer> server;
  if (opt.raw) server = std::make_unique<RawServer>();
  std::unique_ptr<RawDisk> disk;
  if (opt.raw && !opt.raw_disk.empty())
    disk = std::make_unique<RawDisk>(opt.raw_disk, opt.pool_size);
  std::unique_ptr<RemotePool> pool, wide, tls, sealed;
  RawSeal seal;
  LibraryLog liblog;
  if (opt.rpmem && opt.data_tls) liblog.start();  // before librpmem's first call
  if (opt.rpmem) {
    pool = std::make_unique<RemotePool>(opt);
    info.pool = opt.target + ":" + opt.pool_set + ", " + pool->how_opened() + ", " +
                std::to_string(opt.pool_size >> 20) + " MiB used, " +
                std::to_string(pool->nlanes()) + " lanes granted";
    if (opt.wide_lanes) {
      wide =
          std::make_unique<RemotePool>(opt, opt.wide_pool_set, opt.wide_pool_size, opt.wide_lanes);
      info.pool += "\n# wide     " + opt.target + ":" + opt.wide_pool_set + ", " +
                   wide->how_opened() + ", " + std::to_string(wide->nlanes_asked()) +
                   " lanes asked, " + std::to_string(wide->nlanes()) +
                   " granted; persist-wide uses lane 0 only";
    }
    if (opt.data_tls) {
      const unsigned lanes = *std::max_element(opt.lanes.begin(), opt.lanes.end());
      tls = std::make_unique<RemotePool>(opt, opt.tls_pool_set, opt.pool_size, lanes,
                                         RemotePool::Lanes::kTls);
      info.pool += "\n# tls      " + opt.target + ":" + opt.tls_pool_set + ", " +
                   tls->how_opened() + ", " + std::to_string(tls->nlanes()) +
                   " lanes granted, RPMEM_DATA_TLS=1 RPMEM_DATA_SEAL=0: " + liblog.lanes_line() +
                   "; " + kernel_tls_text();
      sealed = std::make_unique<RemotePool>(opt, opt.sealed_pool_set, opt.pool_size, lanes,
                                            RemotePool::Lanes::kSealed);
      info.pool += "\n# sealed   " + opt.target + ":" + opt.sealed_pool_set + ", " +
                   sealed->how_opened() + ", " + std::to_string(sealed->nlanes()) +
                   " lanes granted, RPMEM_DATA_TLS=1: " + liblog.lanes_line();
    }
  } else {
    info.pool = "(raw only)";
  }

  const std::vector<Case> cases = plan(opt);
  std::vector<std::vector<RunSamples>> runs(cases.size());
  // Runs are interleaved, so that a slow moment of the machine touches
  // every case a little rather than one case a lot.
  for (unsigned rep = 0; rep < opt.repeat; ++rep) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case &c = cases[i];
      if (!runs[i].empty() && runs[i].back().error) continue;
      RunSamples s;
      std::string why;
      if (c.op == Op::kRawSeal || c.op == Op::kRawDsync) {  // in this process
        Workload w = c.op == Op::kRawSeal ? seal.workload(c.size, c.lanes, why)
                                          : disk->workload(c.size, c.lanes, why);
        if (w.op) {
          s = run_lanes(opt, c.lanes, w, case_label(c, rep, opt.repeat));
        } else {
          s.error = EINVAL;
          s.error_text = why;
        }
      } else if (is_raw(c.op)) {
        try {
          RawClient client(server->port(), c.op, c.size, c.lanes);
          s = run_lanes(opt, c.lanes, client.workload(), case_label(c, rep, opt.repeat));
        } catch (const std::exception &e) {
          s.error = EIO;
          s.error_text = e.what();
        }
      } else {
        RemotePool &on = c.op == Op::kPersistWide                                  ? *wide
                         : (c.op == Op::kPersistTls || c.op == Op::kReadTls)       ? *tls
                         : (c.op == Op::kPersistSealed || c.op == Op::kReadSealed) ? *sealed
                                                                                   : *pool;
        Workload w = on.workload(c, why);
        if (w.op) {
          s = run_lanes(opt, c.lanes, w, case_label(c, rep, opt.repeat));
          if (s.error) s.error_text += std::string(" (") + rpmem_errormsg() + ")";
        } else {
          s.error = EINVAL;
          s.error_text = why;
        }
      }
      runs[i].push_back(std::move(s));
    }
  }

  std::vector<Result> results;
  for (size_t i = 0; i < cases.size(); ++i) results.push_back(summarize(cases[i], runs[i]));
  print(stdout, opt.format, info, results);
  return 0;
}

}  // namespace
}  // namespace rpmem_bench

int main(int argc, char **argv) {
  try {
    return rpmem_bench::run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rpmem-bench: %s\n", e.what());
    return 1;
  }
}
