// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: data-lane messages. The input is cut into lane hellos, data
// requests and data replies; a decoded message must re-encode to the same
// bytes, and a request that passes the target's range check must really lie
// inside the pool (the check is overflow-safe).
#include "common/proto.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

using namespace rpmem::proto;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// The tcp target's bounds check, as written in tcp_target.cc.
bool in_pool(const DataRequest &r, size_t size) {
  return !(r.length > size || r.offset > size - r.length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::span<const uint8_t> in(data, size);
  if (in.empty()) return 0;
  const uint8_t selector = in[0];
  in = in.subspan(1);
  if (auto h = decode_lane_hello(in)) {
    uint8_t out[kLaneHelloSize];
    encode(*h, out);
    auto again = decode_lane_hello(out);
    check(again && again->lane == h->lane && again->nlanes == h->nlanes &&
          again->epoch == h->epoch && again->proof == h->proof && h->lane < h->nlanes);
  }
  const size_t pool_size = (static_cast<size_t>(selector) + 1) << (selector & 31);
  while (in.size() >= kDataReplySize) {
    if (in.size() >= kDataRequestSize) {
      if (auto r = decode_data_request(in.first(kDataRequestSize))) {
        uint8_t out[kDataRequestSize];
        encode(*r, out);
        auto again = decode_data_request(out);
        check(again && again->op == r->op && again->offset == r->offset &&
              again->length == r->length && again->flags == r->flags);
        if (in_pool(*r, pool_size)) {
          // offset + length must not wrap and must end inside the pool.
          check(r->offset + r->length >= r->offset && r->offset + r->length <= pool_size);
        }
      }
    }
    if (auto r = decode_data_reply(in.first(kDataReplySize))) {
      uint8_t out[kDataReplySize];
      encode(*r, out);
      auto again = decode_data_reply(out);
      check(again && again->status == r->status && again->op == r->op &&
            again->length == r->length);
    }
    const size_t step = (selector & 1) ? kDataReplySize : std::min(kDataRequestSize, in.size());
    in = in.subspan(step);
  }
  return 0;
}
