// SPDX-License-Identifier: BSD-3-Clause
// Tests of the session tokens beside pool set files: a token matches until
// the next is issued or it is forgotten, the token a reopen proved matches
// once more (its answer may have been lost), parts made anew do not; it is
// kept in a file of mode 0600 of a name nobody can plant, and a file that
// is not the daemon's own (a symlink, another length, another owner) never
// matches.
#include "rpmemd/session_tokens.h"

#include "tests/scratch_dir.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace rpmemd::session_tokens {
namespace {

const std::vector<FileId> kParts = {{1, 10, 5}, {1, 11, 6}};

class SessionTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path();
    set_ = dir_ + "/p.set";
    std::ofstream(set_) << "PMEMPOOLSET\n";
  }
  bool matches(const proto::SessionToken &t) const {
    return check(set_, t, kParts) == Verdict::kMatches;
  }
  // The directory's entries but the pool set file.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(dir_))
      if (e.path().filename() != "p.set") out.push_back(e.path().filename().string());
    return out;
  }
  rpmem_test::ScratchDir scratch_{"rpmem-tokens"};
  std::string dir_, set_;
};

TEST_F(SessionTokens, ATokenMatchesUntilTheNextOrUntilForgotten) {
  EXPECT_EQ(file_for(set_), dir_ + "/.p.set.rpmemd-session");
  proto::SessionToken none{};
  EXPECT_FALSE(matches(none)) << "no token yet";
  proto::SessionToken a{}, b{};
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, a));
  EXPECT_TRUE(matches(a));
  EXPECT_FALSE(matches(none));
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, b));
  EXPECT_NE(a, b);
  EXPECT_FALSE(matches(a)) << "another session's open gave the pool a new token";
  EXPECT_TRUE(matches(b));
  struct stat st {};
  ASSERT_EQ(::stat(file_for(set_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(entries(), std::vector<std::string>{".p.set.rpmemd-session"})
      << "a temporary file stays";
  forget(set_);
  EXPECT_FALSE(matches(b));
  EXPECT_FALSE(std::filesystem::exists(file_for(set_)));
}

// A reopen (proving a) gives b; its answer is lost, and the client tries
// again with a: it matches, and gives c, with a kept. A new session's open
// (proving nothing) leaves neither.
TEST_F(SessionTokens, TheTokenAReopenProvedMatchesUntilANewSessionOpens) {
  proto::SessionToken a{}, b{}, c{}, d{};
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, a));
  ASSERT_FALSE(issue(set_, kParts, &a, false, b));
  EXPECT_TRUE(matches(a)) << "the reopen's answer was lost: its client holds a";
  EXPECT_TRUE(matches(b));
  ASSERT_FALSE(issue(set_, kParts, &a, false, c));
  EXPECT_TRUE(matches(a));
  EXPECT_FALSE(matches(b)) << "never received: b may not reopen";
  EXPECT_TRUE(matches(c));
  ASSERT_FALSE(issue(set_, kParts, &c, false, b));  // the client got c, and reopened again
  EXPECT_FALSE(matches(a));
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, d));  // another session
  EXPECT_FALSE(matches(c));
  EXPECT_FALSE(matches(b));
  EXPECT_TRUE(matches(d));
}

TEST_F(SessionTokens, PartsMadeAnewDoNotMatch) {
  proto::SessionToken a{};
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, a));
  EXPECT_EQ(check(set_, a, {{1, 10, 5}, {1, 12, 6}}), Verdict::kReplaced);
  EXPECT_EQ(check(set_, a, {{1, 10, 5}, {1, 11, 7}}), Verdict::kReplaced) << "an inode used again";
  EXPECT_EQ(check(set_, a, {{1, 10, 5}}), Verdict::kReplaced);
  EXPECT_EQ(check(set_, a, kParts), Verdict::kMatches);
  proto::SessionToken other{};
  other[0] = 1;
  EXPECT_EQ(check(set_, other, {{9, 9}}), Verdict::kStale);
}

// A session that may run ahead marks its pool until the file is
// forgotten (its client's close): the pool may be behind its master.
TEST_F(SessionTokens, ASessionThatMayRunAheadMarksThePoolUntilForgotten) {
  proto::SessionToken a{}, b{};
  EXPECT_FALSE(runs_ahead(set_)) << "no token";
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, a));
  EXPECT_FALSE(runs_ahead(set_));
  ASSERT_FALSE(issue(set_, kParts, &a, true, b));
  EXPECT_TRUE(runs_ahead(set_));
  EXPECT_TRUE(matches(a)) << "the mark changes nothing of the tokens";
  EXPECT_TRUE(matches(b));
  forget(set_);
  EXPECT_FALSE(runs_ahead(set_));
}

// The file an older rpmemd wrote (the token alone) still matches: an
// upgrade is a restart too.
TEST_F(SessionTokens, AnOlderDaemonsTokenFileMatches) {
  proto::SessionToken a{};
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i + 3);
  std::ofstream(file_for(set_), std::ios::binary)
      .write(reinterpret_cast<const char *>(a.data()), a.size());
  ::chmod(file_for(set_).c_str(), 0600);
  EXPECT_TRUE(matches(a));
  EXPECT_EQ(check(set_, a, {{5, 5}}), Verdict::kMatches) << "parts unknown then";
}

TEST_F(SessionTokens, AFileThatIsNotTheDaemonsOwnNeverMatches) {
  proto::SessionToken t{};
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, t));
  // One byte more: not a token file.
  std::ofstream(file_for(set_), std::ios::app) << 'x';
  EXPECT_FALSE(matches(t));
  // A symlink to a file holding the token: not followed.
  const std::string elsewhere = dir_ + "/elsewhere";
  std::ofstream(elsewhere).write(reinterpret_cast<const char *>(t.data()), t.size());
  ::unlink(file_for(set_).c_str());
  ASSERT_EQ(::symlink(elsewhere.c_str(), file_for(set_).c_str()), 0);
  EXPECT_FALSE(matches(t));
  // Nor written through.
  proto::SessionToken u{};
  EXPECT_FALSE(issue(set_, kParts, nullptr, false, u));  // renamed over the link
  EXPECT_TRUE(matches(u));
  std::ifstream in(elsewhere, std::ios::binary);
  proto::SessionToken kept{};
  in.read(reinterpret_cast<char *>(kept.data()), kept.size());
  EXPECT_EQ(kept, t) << "the link's target was written";
  // Another user's file (one who may write in the pool set directory):
  // no token, whatever it holds.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(file_for(set_).c_str(), 65534, 65534), 0);
    EXPECT_FALSE(matches(u)) << "a file of another owner matched";
  }
}

// A file planted where the temporary file was once made (its fixed name of
// before), of another owner and open to all: never written through, never
// made the token file; the token file is rpmemd's own, mode 0600.
TEST_F(SessionTokens, AFilePlantedBesideIsNeitherWrittenNorUsed) {
  const std::string planted = file_for(set_) + ".new";
  std::ofstream(planted) << "keep";
  ASSERT_EQ(::chmod(planted.c_str(), 0666), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(planted.c_str(), 65534, 65534), 0);
  }
  proto::SessionToken t{};
  ASSERT_FALSE(issue(set_, kParts, nullptr, false, t));
  EXPECT_TRUE(matches(t));
  std::ifstream in(planted);
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "keep") << "the planted file was written";
  struct stat st {};
  ASSERT_EQ(::lstat(file_for(set_).c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

}  // namespace
}  // namespace rpmemd::session_tokens
