// SPDX-License-Identifier: BSD-3-Clause
// A directory of a test's own under /tmp, removed with all it holds when the
// test is done.
#ifndef RPMEM_TESTS_SCRATCH_DIR_H
#define RPMEM_TESTS_SCRATCH_DIR_H

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

namespace rpmem_test {

class ScratchDir {
 public:
  // /tmp/PREFIX.XXXXXX; ok() is false when it could not be made.
  explicit ScratchDir(const std::string &prefix) {
    const std::string tmpl = "/tmp/" + prefix + ".XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data())) path_ = buf.data();
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_SCRATCH_DIR_H
