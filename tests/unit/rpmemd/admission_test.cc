// SPDX-License-Identifier: BSD-3-Clause
// Admission, the service's caps, without sockets: each cap at its bound
// (N admitted, the next one refused or making room, a freed place given
// back), the order of the checks, which handshake is dropped, and the
// per-certificate sessions and lane counter.
#include "rpmemd/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rpmemd {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Id = Admission::Id;

constexpr const char *kConnections = "too many connections (max-connections)";
constexpr const char *kNoDir = "has no pool set directory";
constexpr const char *kPerClient = "has too many sessions (max-sessions-per-client)";
constexpr const char *kSessions = "cannot be served: too many sessions (max-sessions)";

// Caps high enough not to matter, but for the one a test sets.
Config caps() {
  Config c;
  c.max_handshakes = 1000;
  c.max_connections = 1000;
  c.max_per_address = 1000;
  c.max_sessions = 1000;
  c.max_sessions_per_client = 1000;
  return c;
}

class AdmissionTest : public ::testing::Test {
 protected:
  using Cap = std::pair<unsigned Config::*, unsigned>;
  // An Admission with caps() but for the caps in `set`.
  void make(std::initializer_list<Cap> set = {}) {
    Config c = caps();
    for (const auto &[cap, n] : set) c.*cap = n;
    a_ = std::make_unique<Admission>(c);
  }
  Admission &a() { return *a_; }

  // A connection that is admitted without dropping any: its id.
  Id connect(const std::string &peer = "10.0.0.1") {
    const Admission::Arrival arrival = a().on_connection(peer);
    EXPECT_EQ(arrival.refused, nullptr) << arrival.refused;
    EXPECT_THAT(arrival.dropped, IsEmpty());
    return a().on_handshake_start(peer);
  }
  // One whose handshake has ended, not yet authenticated.
  Id handshaken(const std::string &peer = "10.0.0.1") {
    const Id id = connect(peer);
    a().on_handshake_end(id);
    return id;
  }
  // One that authenticates as `cn` and is served.
  Id session(const std::string &cn, const std::string &peer = "10.0.0.1") {
    const Id id = handshaken(peer);
    const Admission::Verdict v = a().on_authenticated(id, cn, true);
    EXPECT_EQ(v.refused, nullptr) << v.refused;
    EXPECT_NE(v.client_lanes, nullptr);
    return id;
  }
  // The session ends and its connection closes, as Service::Loop does.
  void end(Id id) {
    a().on_session_end(id);
    a().on_close(id);
  }
  // Why a new connection from `peer` is refused (nullptr: it is not).
  const char *refusal(const std::string &peer = "10.0.0.1") {
    return a().on_connection(peer).refused;
  }

  std::unique_ptr<Admission> a_;
};

// Past max-per-address the newcomer is admitted and the oldest handshake of
// that address is dropped: a stranger who came first cannot keep a client
// on the same address out.
TEST_F(AdmissionTest, MaxPerAddressDropsTheOldestHandshakeOfThatAddressOnly) {
  make({{&Config::max_per_address, 2}});
  const Id other = connect("10.0.0.2");
  const Id first = connect("10.0.0.1");
  const Id second = connect("10.0.0.1");
  EXPECT_EQ(a().strangers_from("10.0.0.1"), 2u);
  const Admission::Arrival n = a().on_connection("10.0.0.1");
  EXPECT_EQ(n.refused, nullptr);
  EXPECT_THAT(n.dropped, ElementsAre(first)) << "not " << other << ", another address";
  const Id third = a().on_handshake_start("10.0.0.1");
  // The dropped one is there until it is closed, but is not dropped twice.
  EXPECT_THAT(a().on_connection("10.0.0.1").dropped, ElementsAre(second));
  a().on_close(first);
  a().on_close(second);
  EXPECT_EQ(a().strangers_from("10.0.0.1"), 1u);
  EXPECT_EQ(refusal("10.0.0.1"), nullptr);
  (void)third;
}

// A connection that has said nothing is dropped before an older one that
// is in its handshake: a client speaks at once, a silent stranger does not.
TEST_F(AdmissionTest, SilentHandshakesAreDroppedBeforeOnesThatSpoke) {
  make({{&Config::max_per_address, 3}});
  const Id client = connect("10.0.0.1");
  a().on_first_bytes(client);
  const Id silent1 = connect("10.0.0.1");
  const Id silent2 = connect("10.0.0.1");
  EXPECT_THAT(a().on_connection("10.0.0.1").dropped, ElementsAre(silent1));
  a().on_handshake_start("10.0.0.1");
  EXPECT_THAT(a().on_connection("10.0.0.1").dropped, ElementsAre(silent2));
  a().on_handshake_start("10.0.0.1");
  // The same order for max-handshakes.
  make({{&Config::max_handshakes, 2}});
  const Id speaks = connect("10.0.0.5");
  a().on_first_bytes(speaks);
  const Id quiet = connect("10.0.0.6");
  EXPECT_THAT(a().on_connection("10.0.0.7").dropped, ElementsAre(quiet));
}

TEST_F(AdmissionTest, AnAddressCountsOnlyItsUnauthenticatedConnections) {
  make({{&Config::max_per_address, 1}});
  const Id s1 = session("alice", "10.0.0.1");
  EXPECT_EQ(a().strangers_from("10.0.0.1"), 0u) << "released when its handshake ended";
  // A host with many clients: each is a stranger only until it authenticates.
  const Id s2 = session("alice", "10.0.0.1");
  session("bob", "10.0.0.1");
  EXPECT_EQ(a().sessions(), 3u);
  const Id stranger = connect("10.0.0.1");
  // Sessions are never dropped for the address's cap: the stranger is.
  EXPECT_THAT(a().on_connection("10.0.0.1").dropped, ElementsAre(stranger));
  end(s1);
  end(s2);
  EXPECT_EQ(a().sessions(), 1u);
  a().on_handshake_end(stranger);
  EXPECT_EQ(a().strangers_from("10.0.0.1"), 0u);
  EXPECT_EQ(refusal("10.0.0.1"), nullptr);
}

TEST_F(AdmissionTest, MaxConnectionsWithNoHandshakeToDropRefusesUntilOneCloses) {
  make({{&Config::max_connections, 2}});
  const Id s1 = session("alice");
  session("bob");
  EXPECT_EQ(a().connections(), 2u);
  const Admission::Arrival full = a().on_connection("10.0.0.9");
  EXPECT_STREQ(full.refused, kConnections);
  EXPECT_THAT(full.dropped, IsEmpty()) << "sessions are never dropped";
  end(s1);
  EXPECT_EQ(a().connections(), 1u);
  EXPECT_EQ(refusal(), nullptr);
}

TEST_F(AdmissionTest, MaxConnectionsDropsTheOldestHandshakeNotASession) {
  make({{&Config::max_connections, 3}});
  session("alice");  // the oldest, but in a session
  const Id h2 = connect();
  const Id h3 = connect();
  Admission::Arrival n = a().on_connection("10.0.0.9");
  EXPECT_EQ(n.refused, nullptr);
  EXPECT_THAT(n.dropped, ElementsAre(h2));
  const Id h4 = a().on_handshake_start("10.0.0.9");
  EXPECT_EQ(a().connections(), 4u) << "h2 is there until its handler has run";
  // ... but counts no more, and is not dropped twice.
  n = a().on_connection("10.0.0.9");
  EXPECT_EQ(n.refused, nullptr);
  EXPECT_THAT(n.dropped, ElementsAre(h3));
  a().on_handshake_start("10.0.0.9");
  n = a().on_connection("10.0.0.9");
  EXPECT_THAT(n.dropped, ElementsAre(h4));
  a().on_handshake_end(h2);
  a().on_close(h2);
  a().on_handshake_end(h3);
  a().on_close(h3);
  EXPECT_EQ(a().connections(), 3u);
}

// A dropped connection counts against no cap: were it counted until its
// handler has run, a flood that keeps the loop dropping would fill the
// caps with them, and the next arrival would drop the oldest that spoke
// -- the real client, in the middle of its handshake.
TEST_F(AdmissionTest, DroppedConnectionsDoNotMakeTheCapsDropOneThatSpoke) {
  make({{&Config::max_per_address, 2}, {&Config::max_handshakes, 2}});
  const Id client = connect("10.0.0.1");
  a().on_first_bytes(client);
  Id stranger = connect("10.0.0.1");
  for (int i = 0; i < 10; ++i) {  // none of the dropped ones is handled yet
    const Admission::Arrival n = a().on_connection("10.0.0.1");
    EXPECT_EQ(n.refused, nullptr);
    EXPECT_THAT(n.dropped, ElementsAre(stranger)) << "arrival " << i;
    stranger = a().on_handshake_start("10.0.0.1");
  }
  EXPECT_EQ(a().handshakes(), 12u);
  EXPECT_EQ(a().strangers_from("10.0.0.1"), 12u);
}

TEST_F(AdmissionTest, MaxHandshakesDropsTheOldestToAdmitTheNew) {
  make({{&Config::max_handshakes, 2}});
  const Id s = session("alice");
  const Id h1 = connect();
  const Id h2 = connect();
  EXPECT_EQ(a().handshakes(), 2u);
  Admission::Arrival n = a().on_connection("10.0.0.9");
  EXPECT_EQ(n.refused, nullptr) << "a full handshake cap is never a refusal";
  EXPECT_THAT(n.dropped, ElementsAre(h1)) << "the oldest handshake, not the older session";
  const Id h3 = a().on_handshake_start("10.0.0.9");
  EXPECT_EQ(a().handshakes(), 3u) << "h1 is there until its handler has run";
  a().on_handshake_end(h1);
  a().on_close(h1);
  EXPECT_EQ(a().handshakes(), 2u);
  n = a().on_connection("10.0.0.9");
  EXPECT_THAT(n.dropped, ElementsAre(h2));
  a().on_handshake_end(h2);
  a().on_close(h2);
  // A place freed without a drop: the next one drops nothing.
  a().on_handshake_end(h3);
  a().on_close(h3);
  EXPECT_EQ(a().handshakes(), 0u);
  connect();
  EXPECT_EQ(a().sessions(), 1u);
  EXPECT_EQ(a().connections(), 2u);
  end(s);
}

TEST_F(AdmissionTest, AClientRefusedItsSessionCanBeDroppedForANewerConnection) {
  // Its EACCES hello is still being written: it is no session.
  make({{&Config::max_handshakes, 1}, {&Config::max_sessions, 1}});
  session("alice");
  const Id refused = handshaken();
  EXPECT_STREQ(a().on_authenticated(refused, "bob", true).refused, kSessions);
  connect();  // the handshakes were free: no drop
  const Admission::Arrival n = a().on_connection("10.0.0.9");
  EXPECT_THAT(n.dropped, ElementsAre(refused)) << "older than the handshake after it";
}

TEST_F(AdmissionTest, ARefusedConnectionDropsNothing) {
  // Every connection is in a session: a newcomer past max-connections has
  // nothing to take the place of, and costs nobody anything.
  make({{&Config::max_connections, 1}});
  session("alice");
  const Admission::Arrival n = a().on_connection("10.0.0.1");
  EXPECT_STREQ(n.refused, kConnections);
  EXPECT_THAT(n.dropped, IsEmpty());
}

TEST_F(AdmissionTest, MaxSessionsRefusesTheNextClientUntilASessionEnds) {
  make({{&Config::max_sessions, 2}});
  const Id s1 = session("alice");
  session("bob");
  const Id late = handshaken();
  const Admission::Verdict v = a().on_authenticated(late, "carol", true);
  EXPECT_STREQ(v.refused, kSessions);
  EXPECT_EQ(v.client_lanes, nullptr);
  EXPECT_EQ(a().sessions(), 2u);
  EXPECT_EQ(a().sessions_of("carol"), 0u);
  EXPECT_EQ(a().lanes_of("carol"), nullptr) << "a refused client gets no lane counter";
  a().on_close(late);
  end(s1);
  EXPECT_EQ(a().sessions(), 1u);
  session("carol");
}

TEST_F(AdmissionTest, MaxSessionsPerClientBoundsOneCertificateOnly) {
  make({{&Config::max_sessions_per_client, 2}});
  const Id s1 = session("alice");
  session("alice");
  const Id third = handshaken();
  EXPECT_STREQ(a().on_authenticated(third, "alice", true).refused, kPerClient);
  EXPECT_EQ(a().sessions_of("alice"), 2u);
  a().on_close(third);
  session("bob");  // another certificate has its own
  end(s1);
  EXPECT_EQ(a().sessions_of("alice"), 1u);
  session("alice");
}

TEST_F(AdmissionTest, AuthenticationChecksDirectoryThenPerClientThenMaxSessions) {
  make({{&Config::max_sessions_per_client, 1}, {&Config::max_sessions, 1}});
  session("alice");  // both caps full now
  const Id id = handshaken();
  EXPECT_STREQ(a().on_authenticated(id, "alice", false).refused, kNoDir);
  EXPECT_STREQ(a().on_authenticated(id, "", true).refused, kNoDir) << "no name";
  EXPECT_STREQ(a().on_authenticated(id, "alice", true).refused, kPerClient);
  EXPECT_STREQ(a().on_authenticated(id, "bob", true).refused, kSessions);
  EXPECT_EQ(a().sessions(), 1u) << "no refusal took a place";
}

TEST_F(AdmissionTest, EndedSessionsGiveTheirCertificatesPlaceBackEveryTime) {
  // Once, an ended session kept its place: a client that reconnected
  // max-sessions-per-client times was refused for good.
  make({{&Config::max_sessions_per_client, 64},
        {&Config::max_sessions, 64},
        {&Config::max_connections, 64}});
  for (int round = 0; round < 3 * 64; ++round) {
    const Id id = handshaken();
    ASSERT_EQ(a().on_authenticated(id, "alice", true).refused, nullptr) << "round " << round;
    end(id);
    ASSERT_EQ(a().sessions_of("alice"), 0u) << "round " << round;
  }
  EXPECT_EQ(a().sessions(), 0u);
  EXPECT_EQ(a().connections(), 0u);
  EXPECT_EQ(a().handshakes(), 0u);
}

TEST_F(AdmissionTest, ASessionWhoseThreadCouldNotStartGivesItsPlaceBack) {
  make({{&Config::max_sessions_per_client, 1}});
  const Id id = session("alice");
  a().on_session_end(id);  // as the loop does before its EACCES hello
  EXPECT_EQ(a().sessions_of("alice"), 0u);
  EXPECT_EQ(a().sessions(), 0u);
  EXPECT_EQ(a().lanes_of("alice"), nullptr);
  a().on_close(id);
  session("alice");
}

TEST_F(AdmissionTest, ACertificatesSessionsShareOneLaneCounterUntilTheLastEnds) {
  make();
  const Id a1 = session("alice");
  const Admission::LaneCounter lanes = a().lanes_of("alice");
  ASSERT_NE(lanes, nullptr);
  EXPECT_EQ(lanes->load(), 0);
  lanes->fetch_add(3);  // a1's session was granted 3 lanes
  const Id a2 = handshaken();
  const Admission::Verdict v = a().on_authenticated(a2, "alice", true);
  EXPECT_EQ(v.client_lanes, lanes) << "the second session sees the first one's lanes";
  session("bob");
  EXPECT_NE(a().lanes_of("bob"), lanes) << "each certificate its own";
  end(a1);
  EXPECT_EQ(a().lanes_of("alice"), lanes) << "alice has a session still";
  end(a2);
  EXPECT_EQ(a().lanes_of("alice"), nullptr) << "gone with the last session";
  // Should a session have kept lanes counted (it gives them back when it
  // ends), the next session of the certificate starts afresh.
  const Id a3 = session("alice");
  ASSERT_NE(a().lanes_of("alice"), nullptr);
  EXPECT_NE(a().lanes_of("alice"), lanes);
  EXPECT_EQ(a().lanes_of("alice")->load(), 0);
  end(a3);
}

TEST_F(AdmissionTest, AClosedConnectionHoldsNothing) {
  // Whatever its state when it closes.
  make({{&Config::max_handshakes, 1}, {&Config::max_per_address, 1}, {&Config::max_sessions, 1}});
  const Id h = connect();
  a().on_close(h);  // without its handshake's end
  EXPECT_EQ(a().handshakes(), 0u);
  EXPECT_EQ(a().strangers_from("10.0.0.1"), 0u);
  const Id s = session("alice");
  a().on_close(s);  // without its session's end
  EXPECT_EQ(a().sessions(), 0u);
  EXPECT_EQ(a().connections(), 0u);
  EXPECT_EQ(a().lanes_of("alice"), nullptr);
  session("alice");
}

}  // namespace
}  // namespace rpmemd
