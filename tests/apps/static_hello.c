// SPDX-License-Identifier: MIT
// Linked with -static: nothing can be preloaded into a program without an ELF
// interpreter, so smc_run runs it without smcr after one warning, and refuses it
// with --strict.
#include <stdio.h>

int main(void)
{
    puts("static hello");
    return 3;
}
