// SPDX-License-Identifier: BSD-3-Clause
// Raw mode: what plain TCP on the same machine does for the same sizes.
#ifndef RPMEM_TOOLS_RPMEM_BENCH_RAW_H
#define RPMEM_TOOLS_RPMEM_BENCH_RAW_H

#include "tools/rpmem-bench/runner.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rpmem_bench {

// A server thread on a loopback port. Each connection first says what it
// wants: request/response (read `size` bytes, answer 16; waiting as an
// rpmemd lane worker waits, or blocking) or sink (read until EOF, then
// answer the byte count). One thread serves each connection; rpmemd serves
// its lanes with at most one worker per CPU, so the two match at one lane,
// and at more lanes than CPUs the raw cases have more threads.
class RawServer {
 public:
  RawServer();  // throws std::runtime_error
  ~RawServer();
  RawServer(const RawServer &) = delete;
  RawServer &operator=(const RawServer &) = delete;
  uint16_t port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// The client side of one raw case: `lanes` connections set up before the
// clock starts, closed when it is destroyed.
class RawClient {
 public:
  // op is Op::kRawRr or Op::kRawStream.
  RawClient(uint16_t port, Op op, size_t size, unsigned lanes);  // throws std::runtime_error
  ~RawClient();
  RawClient(const RawClient &) = delete;
  RawClient &operator=(const RawClient &) = delete;
  Workload workload();

 private:
  Op op_;
  size_t size_;
  std::vector<int> fds_;
  std::vector<std::unique_ptr<uint8_t[]>> bufs_;
};

// Durable writes on the file system of the pool (Op::kRawDsync): one file
// of `file_size` bytes in `dir`, allocated with posix_fallocate as rpmemd
// allocates a part, opened O_DSYNC; each lane pwrites `size` bytes at the
// offsets the rpmem cases use. The file is removed when this is destroyed.
class RawDisk {
 public:
  RawDisk(const std::string &dir, size_t file_size);  // throws std::runtime_error
  ~RawDisk();
  RawDisk(const RawDisk &) = delete;
  RawDisk &operator=(const RawDisk &) = delete;
  // Empty op (and `why`) when the block does not fit a lane's slice.
  Workload workload(size_t size, unsigned lanes, std::string &why);

 private:
  std::string path_;
  size_t file_size_;
  int fd_ = -1;
  std::vector<std::unique_ptr<uint8_t[]>> bufs_;
};

// This machine's AES-GCM as sealed lanes use it (Op::kRawSeal), with their
// own FrameCipher: per lane, contexts kept with their key schedules, each
// frame only a new nonce; one call seals a message of `size` bytes in
// frames of at most 64 KiB into a buffer, then opens them in place and
// checks their tags.
class RawSeal {
 public:
  RawSeal();
  ~RawSeal();
  RawSeal(const RawSeal &) = delete;
  RawSeal &operator=(const RawSeal &) = delete;
  Workload workload(size_t size, unsigned lanes, std::string &why);

 private:
  struct Lane;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace rpmem_bench

#endif  // RPMEM_TOOLS_RPMEM_BENCH_RAW_H
