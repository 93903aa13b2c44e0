// SPDX-License-Identifier: BSD-3-Clause
// A session's part in the catch-up of a pool whose client ran ahead of it
// (protocol minor 10): the client's reports of its pool (kept for `rpmemd
// status`, logged when the state changes) and the checksums of the pool's
// pages it asks for, to prove what it sent again.
#include "common/log.h"
#include "common/page_sum.h"
#include "rpmemd/session.h"

namespace rpmemd {

using rpmem::errc;
using rpmem::proto::MsgType;
using rpmem::proto::PoolSync;
using rpmem::proto::Status;

namespace {

const char *sync_name(PoolSync s) {
  return s == PoolSync::kBehind ? "behind" : s == PoolSync::kResyncing ? "catching up" : "in sync";
}

}  // namespace

std::error_code Session::handle_pool_state(const proto::Bytes &payload) {
  auto report = proto::decode_pool_state(payload);
  if (!report) {
    RPMEM_LOG_ERR("malformed pool state report");
    return errc(EPROTO);
  }
  if (report->state != reported_) {
    RPMEM_LOG_NOTICE("the client reports pool set '%s' %s (%llu bytes to send again, %llu sent)",
                     pool_set_.c_str(), sync_name(report->state),
                     static_cast<unsigned long long>(report->bytes_left),
                     static_cast<unsigned long long>(report->bytes_done));
    reported_ = report->state;
  }
  if (params_.status) params_.status->catch_up(*report);
  return {};
}

std::error_code Session::handle_checksum(const proto::Bytes &payload) {
  auto req = proto::decode_checksum_request(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed checksum request");
    return errc(EPROTO);
  }
  proto::ChecksumResponse resp;
  const uint64_t size = view_ ? view_->size() : 0;
  const uint8_t *base = view_ ? view_->base() : nullptr;
  for (const proto::PageRange &r : req->ranges) {
    if (!base || r.first > (size - 1) / proto::kChecksumPage ||
        r.count > (size - 1) / proto::kChecksumPage - r.first + 1) {
      RPMEM_LOG_ERR("checksum request outside the pool");
      resp.status = base ? Status::kBadSize : Status::kFatal;
      resp.sums.clear();
      break;
    }
    for (uint64_t page = r.first; page < r.first + r.count; ++page) {
      const uint64_t off = page * proto::kChecksumPage;
      resp.sums.push_back(
          rpmem::page_sum(base + off, std::min<uint64_t>(proto::kChecksumPage, size - off)));
    }
  }
  return io_.write_all(proto::encode(resp));
}

// A pool set is named within its client's directory: the name and the
// client's certificate name it.
void BehindPools::ended(const std::string &pool_set, const std::string &cn) {
  opened(pool_set, cn);
  std::lock_guard lock(mu_);
  pools_.push_back({pool_set, cn, rpmem::transport::LaneCounters::now_ns()});
}

void BehindPools::opened(const std::string &pool_set, const std::string &cn) {
  std::lock_guard lock(mu_);
  std::erase_if(pools_, [&](const StatusSnapshot::Behind &b) {
    return b.pool_set == pool_set && b.cn == cn;
  });
}

std::vector<StatusSnapshot::Behind> BehindPools::list() const {
  std::lock_guard lock(mu_);
  return pools_;
}

}  // namespace rpmemd
