// SPDX-License-Identifier: BSD-3-Clause
// Writes the seed corpus of the fuzz targets: fuzz_seeds DIR writes
// DIR/<target>/seed-N for every target (valid messages and files made by the
// project's own encoders and pool store, plus a few hand-written ones).
#include "common/proto.h"
#include "rpmemd/pool_store.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace rpmem::proto;

namespace {

std::string g_out;

void seed(const std::string &target, const Bytes &bytes) {
  fs::create_directories(g_out + "/" + target);
  int n = 0;
  std::string path;
  do path = g_out + "/" + target + "/seed-" + std::to_string(n++);
  while (fs::exists(path));
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), static_cast<long>(bytes.size()));
}

void seed(const std::string &target, const std::string &text) {
  seed(target, Bytes(text.begin(), text.end()));
}

rpmem::PoolAttr sample_attr() {
  rpmem::PoolAttr a{};
  std::memcpy(a.signature.data(), "PMEMOBJ", 7);
  a.major = 6;
  for (int i = 0; i < 16; ++i) {
    a.poolset_uuid[i] = static_cast<uint8_t>(1 + i);
    a.uuid[i] = static_cast<uint8_t>(17 + i);
  }
  return a;
}

void control() {
  Bytes all;
  auto add = [&](const Bytes &f) {
    seed("control", f);
    all.insert(all.end(), f.begin(), f.end());
  };
  Hello hello;
  hello.transports = transport_bit(TransportKind::kTcp);
  add(encode(hello));
  PoolRequest req;
  req.nlanes = 4;
  req.pool_size = 8 << 20;
  req.transports = transport_bit(TransportKind::kTcp);
  req.attr = sample_attr();
  req.pool_set = "dir/pool.set";
  add(encode(MsgType::kCreate, req));
  req.attr = {};
  add(encode(MsgType::kOpen, req));
  PoolResponse resp;
  resp.nlanes = 4;
  resp.port = 40000;
  resp.transport = TransportKind::kTcp;
  resp.pool_flags = kPoolHasHeaders;
  resp.remote_size = 8 << 20;
  resp.secret.fill(0x5a);
  resp.attr = sample_attr();
  resp.provider_data = {1, 2, 3, 4};
  add(encode(resp));
  add(encode(SetAttrRequest{sample_attr()}));
  add(encode(CloseRequest{kCloseRemove}));
  add(encode(MsgType::kSetAttrResp, StatusResponse{Status::kSuccess}));
  add(encode(MsgType::kCloseResp, StatusResponse{Status::kNoExist}));
  seed("control", all);
}

void data() {
  LaneHello h;
  h.proof.fill(0xa5);
  h.lane = 2;
  h.nlanes = 4;
  uint8_t hb[kLaneHelloSize];
  encode(h, hb);
  Bytes b{0};
  b.insert(b.end(), hb, hb + sizeof(hb));
  seed("data", b);
  for (DataOp op :
       {DataOp::kPersist, DataOp::kDeepPersist, DataOp::kFlush, DataOp::kDrain, DataOp::kRead}) {
    DataRequest r{op, kDataRelaxed, 4096, 64};
    uint8_t rb[kDataRequestSize];
    encode(r, rb);
    DataReply rep{0, op, op == DataOp::kRead ? 64u : 0u};
    uint8_t pb[kDataReplySize];
    encode(rep, pb);
    Bytes s{20};
    s.insert(s.end(), rb, rb + sizeof(rb));
    s.insert(s.end(), pb, pb + sizeof(pb));
    seed("data", s);
  }
}

void text_seeds() {
  seed("poolset", "PMEMPOOLSET\n8M /mnt/pmem/pool.part0\n");
  seed("poolset", "PMEMPOOLSET\r\nOPTION SINGLEHDR\r\n2MiB /a/b  # part\r\n1GB /c\r\n");
  seed("poolset", "PMEMPOOLSET\nOPTION NOHDRS\n# comment\n\n3kB /x\n2097152 /y\n1T /z\n");
  seed("poolset", "PMEMPOOLSET\n2M /p\nREPLICA host remote.set\n");
  seed("config", "poolset-dir = $HOME/pools\nlog-file = /tmp/rpmemd.log\nlog-level = info\n");
  seed("config", "persist-apm = yes\npersist-general = no\nuse-syslog = no # c\nnthreads = 4\n");
  seed("config", "# only a comment\n\n   \nlog-level=debug\n");
  for (const char *t : {"host", "user@host", "user@host:2222", "[::1]", "user@[fd00::5]:22",
                        "fd00::1:2", "a@b@c:65535", "host:0", "[::1"})
    seed("target", t);
}

void pool_hdr() {
  char tmpl[] = "/tmp/rpmem-fuzz-seeds-XXXXXX";
  if (!::mkdtemp(tmpl)) return;
  std::string dir = tmpl;
  for (const char *opt : {"", "OPTION SINGLEHDR\n"}) {
    std::ofstream(dir + "/p.set") << "PMEMPOOLSET\n"
                                  << opt << "2M " << dir << "/p.part0\n2M " << dir << "/p.part1\n";
    rpmemd::PoolStore store(dir);
    std::unique_ptr<rpmemd::MappedPool> pool;
    rpmem::PoolAttr attr = sample_attr();
    if (*opt) attr.incompat_features = 1;  // SINGLEHDR
    if (store.create("p.set", &attr, pool)) {
      std::fprintf(stderr, "pool_hdr seed: create failed\n");
      continue;
    }
    pool.reset();
    Bytes b;
    for (int i = 0; i < 2; ++i) {
      std::ifstream in(dir + "/p.part" + std::to_string(i), std::ios::binary);
      Bytes page(4096);
      in.read(reinterpret_cast<char *>(page.data()), 4096);
      b.insert(b.end(), page.begin(), page.end());
    }
    seed("pool_hdr", b);
    fs::remove(dir + "/p.part0");
    fs::remove(dir + "/p.part1");
  }
  fs::remove_all(dir);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_out = argv[1];
  control();
  data();
  text_seeds();
  pool_hdr();
  return 0;
}
