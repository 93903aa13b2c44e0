// SPDX-License-Identifier: BSD-3-Clause
// Admission: the caps of the service on its control connections, counted
// and decided without sockets -- connections in all (max-connections), TLS
// handshakes in progress (max-handshakes), unauthenticated connections of
// one address (max-per-address), sessions (max-sessions), and the sessions
// of one client certificate (max-sessions-per-client) with the lane
// counter they share (max-lanes-per-client). Service::Loop tells it what
// happens to each connection and carries out what it answers: it closes
// the connections to drop, logs the refusals, tells a refused client
// EACCES.
//
// Thread-safety: none; the event loop's thread only. A lane counter it
// hands out is an atomic that the certificate's sessions share on threads
// of their own.
#ifndef RPMEMD_ADMISSION_H
#define RPMEMD_ADMISSION_H

#include "rpmemd/config.h"

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rpmemd {

class Admission {
 public:
  // A connection: numbered from 1, in the order they are admitted.
  using Id = unsigned;
  using LaneCounter = std::shared_ptr<std::atomic<long>>;

  // Takes the caps of `config`.
  explicit Admission(const Config &config);

  // What to do with a connection just accepted.
  struct Arrival {
    // Why it is refused (a string literal: RefusalLog counts by address),
    // or nullptr: it is admitted, and on_handshake_start() follows.
    const char *refused = nullptr;
    // Connections to close first, to make room: the oldest that are not
    // in a session (handshakes), in the order they came. From now on they
    // count against no cap (the loop closes their socket at once), and are
    // forgotten with their on_handshake_end() / on_close(). Never set with
    // `refused`.
    std::vector<Id> dropped;
  };
  // A connection from `peer` (a numeric address) was accepted. Checked in
  // this order: max-per-address (the oldest handshake of that address is
  // dropped: the newcomer may be the real client, and the first to come
  // may be a stranger on the same host or behind the same NAT);
  // max-connections (the oldest handshake is dropped, or refused when there
  // is none); max-handshakes (the oldest handshake is dropped). Handshakes
  // that have not sent a byte yet go first, oldest first: a client starts
  // its handshake as soon as it is connected, a stranger who holds a slot
  // in silence loses it before anyone who speaks.
  // `spoke`, when given, tells whether a silent connection's first bytes
  // are there unread (the loop takes new connections before it reads).
  Arrival on_connection(const std::string &peer, const std::function<bool(Id)> &spoke = nullptr);
  // The connection's first bytes came (its handshake has started for real).
  void on_first_bytes(Id id);

  // The admitted connection starts its TLS handshake: from now on it counts
  // as a connection, as a handshake and against `peer`'s max-per-address.
  Id on_handshake_start(const std::string &peer);
  // Its handshake ended, authenticated or not: it no longer counts as a
  // handshake, nor against its address (max-per-address bounds strangers;
  // a host with many clients is bounded by their certificates' caps).
  void on_handshake_end(Id id);

  // What an authenticated client gets.
  struct Verdict {
    // Why it is not served (a literal, logged after "certificate 'CN' "),
    // or nullptr: a session of `cn` is counted.
    const char *refused = nullptr;
    // Served: the lanes granted to all sessions of `cn`, shared with them.
    LaneCounter client_lanes;
  };
  // Connection `id` authenticated as certificate `cn`, whose pool set
  // directory exists or not (`has_pool_dir`). Checked in this order: a
  // name and a directory, max-sessions-per-client, max-sessions.
  Verdict on_authenticated(Id id, const std::string &cn, bool has_pool_dir);
  // Its session ended (or its thread could not start): its places are
  // given back, and with the certificate's last session its lane counter
  // goes (the next session of that certificate starts a new one).
  void on_session_end(Id id);

  // Connection `id` is closed: it counts no more. (What it still held --
  // a handshake, a session -- is given back too; the loop ends those
  // first.)
  void on_close(Id id);

  // The counts, for tests (those dropped included, until they are closed).
  size_t connections() const noexcept { return conns_.size(); }
  unsigned handshakes() const noexcept { return handshakes_; }
  unsigned sessions() const noexcept { return sessions_; }
  unsigned strangers_from(const std::string &peer) const;  // max-per-address, dropped included
  unsigned sessions_of(const std::string &cn) const;
  LaneCounter lanes_of(const std::string &cn) const;  // null: no session

 private:
  struct Conn {
    Id id = 0;
    std::string peer;
    std::string cn;          // once in a session
    bool handshake = false;  // counted in handshakes_ and per_address_
    bool dropped = false;    // in an Arrival's `dropped`
    bool spoke = false;      // its first bytes came
    bool in_session = false;
  };
  Conn *find(Id id);
  // Marks the oldest connection not in a session and not dropped yet (of
  // `peer` only, when given), a silent one before one that spoke, as
  // dropped and adds it to `dropped`; false when there is none.
  bool drop_oldest_handshake(std::vector<Id> &dropped, const std::string *peer = nullptr,
                             const std::function<bool(Id)> *spoke = nullptr);
  // Handshakes of `peer` not dropped yet.
  unsigned live_from(const std::string &peer) const;

  const unsigned max_handshakes_, max_connections_, max_per_address_, max_sessions_,
      max_sessions_per_client_;
  Id next_id_ = 0;
  std::vector<Conn> conns_;  // in the order they came
  unsigned handshakes_ = 0, sessions_ = 0;
  // Of conns_ and of handshakes_, those dropped whose handler has not run.
  size_t dropped_conns_ = 0;
  unsigned dropped_handshakes_ = 0;
  std::map<std::string, unsigned> per_address_, per_client_;
  // Per certificate, while it has sessions: the lanes they hold.
  std::map<std::string, LaneCounter> client_lanes_;
};

}  // namespace rpmemd

#endif  // RPMEMD_ADMISSION_H
