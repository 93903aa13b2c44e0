// SPDX-License-Identifier: BSD-3-Clause
// Errors inside rpmem: std::error_code holding errno values, and Result<T>.
#ifndef RPMEM_COMMON_ERROR_H
#define RPMEM_COMMON_ERROR_H

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace rpmem {

// An errno value as an error_code (generic category).
inline std::error_code errc(int errno_value) noexcept {
  return {errno_value, std::generic_category()};
}

// The current errno as an error_code.
inline std::error_code last_errc() noexcept { return errc(errno); }

// An error with a message meant for rpmem_errormsg() or a log line.
struct Error {
  std::error_code code;
  std::string message;
};

// Thrown only during setup (constructors, parsing); never on the data path.
class SetupError : public std::system_error {
 public:
  SetupError(int errno_value, const std::string &what)
      : std::system_error(errc(errno_value), what) {}
};

// A value or an Error. C++20 has no std::expected.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T &value() & { return std::get<0>(v_); }
  T &&value() && { return std::get<0>(std::move(v_)); }
  const T &value() const & { return std::get<0>(v_); }
  T &operator*() & { return value(); }
  T *operator->() { return &value(); }
  const Error &error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace rpmem

#endif  // RPMEM_COMMON_ERROR_H
