// SPDX-License-Identifier: BSD-3-Clause
#include "rpmemd/config.h"
