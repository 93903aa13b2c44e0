// SPDX-License-Identifier: BSD-3-Clause
// rpmemd session: placeholder.
namespace rpmemd {}
