// SPDX-License-Identifier: BSD-3-Clause
#include "rpmemd/pool_store.h"
