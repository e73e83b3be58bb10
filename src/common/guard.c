/* SPDX-License-Identifier: MIT */
/* Storage of the per-thread recursion depth declared in guard.h. */
#include "common/guard.h"

__thread unsigned smcr_guard_depth __attribute__((tls_model("initial-exec")));
