/* SPDX-License-Identifier: MIT */
/*
 * The kernel's own messages captured in tests/data/kernel-smcr (meson passes
 * the directory as SMCR_TESTDATA_DIR), for the unit tests that decode them.
 * Include after <cmocka.h>.
 */
#ifndef SMCR_TESTS_UNIT_TESTDATA_H
#define SMCR_TESTS_UNIT_TESTDATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Up to cap bytes of the capture `name` into buf: their count (the test fails without
 * it). */
static inline size_t load_bin(const char *name, uint8_t *buf, size_t cap)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", SMCR_TESTDATA_DIR, name);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s", path);
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

#endif /* SMCR_TESTS_UNIT_TESTDATA_H */
