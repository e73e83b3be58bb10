// SPDX-License-Identifier: MIT
// Linked with -static: smc_run must refuse it (nothing can be preloaded into a
// program without an ELF interpreter) and run it only with --force.
#include <stdio.h>

int main(void)
{
    puts("static hello");
    return 3;
}
