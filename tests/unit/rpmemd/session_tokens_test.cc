// SPDX-License-Identifier: BSD-3-Clause
// Tests of the session tokens beside pool set files: a token matches until
// the next is issued or it is forgotten, it is kept in a file of mode 0600,
// and a file that is not the daemon's own (a symlink, another length) never
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

class SessionTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path();
    set_ = dir_ + "/p.set";
    std::ofstream(set_) << "PMEMPOOLSET\n";
  }
  rpmem_test::ScratchDir scratch_{"rpmem-tokens"};
  std::string dir_, set_;
};

TEST_F(SessionTokens, ATokenMatchesUntilTheNextOrUntilForgotten) {
  EXPECT_EQ(file_for(set_), dir_ + "/.p.set.rpmemd-session");
  proto::SessionToken none{};
  EXPECT_FALSE(matches(set_, none)) << "no token yet";
  proto::SessionToken a{}, b{};
  ASSERT_FALSE(issue(set_, a));
  EXPECT_TRUE(matches(set_, a));
  EXPECT_FALSE(matches(set_, none));
  ASSERT_FALSE(issue(set_, b));
  EXPECT_NE(a, b);
  EXPECT_FALSE(matches(set_, a)) << "another session's open gave the pool a new token";
  EXPECT_TRUE(matches(set_, b));
  struct stat st {};
  ASSERT_EQ(::stat(file_for(set_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(proto::kTokenSize));
  EXPECT_FALSE(std::filesystem::exists(file_for(set_) + ".new")) << "the temporary file stays";
  forget(set_);
  EXPECT_FALSE(matches(set_, b));
  EXPECT_FALSE(std::filesystem::exists(file_for(set_)));
}

TEST_F(SessionTokens, AFileThatIsNotTheDaemonsOwnNeverMatches) {
  proto::SessionToken t{};
  ASSERT_FALSE(issue(set_, t));
  // One byte more: not a token file.
  std::ofstream(file_for(set_), std::ios::app) << 'x';
  EXPECT_FALSE(matches(set_, t));
  // A symlink to a file holding the token: not followed.
  const std::string elsewhere = dir_ + "/elsewhere";
  std::ofstream(elsewhere).write(reinterpret_cast<const char *>(t.data()), t.size());
  ::unlink(file_for(set_).c_str());
  ASSERT_EQ(::symlink(elsewhere.c_str(), file_for(set_).c_str()), 0);
  EXPECT_FALSE(matches(set_, t));
  // Nor written through.
  proto::SessionToken u{};
  EXPECT_FALSE(issue(set_, u));  // renamed over the link
  EXPECT_TRUE(matches(set_, u));
  std::ifstream in(elsewhere, std::ios::binary);
  proto::SessionToken kept{};
  in.read(reinterpret_cast<char *>(kept.data()), kept.size());
  EXPECT_EQ(kept, t) << "the link's target was written";
}

}  // namespace
}  // namespace rpmemd::session_tokens
