/* SPDX-License-Identifier: MIT */
/*
 * Compiler helpers shared by every layer: branch hints, attributes,
 * ARRAY_SIZE, container_of.
 */
#ifndef SMCR_COMMON_COMPILER_H
#define SMCR_COMMON_COMPILER_H

#include <stddef.h>

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define SMCR_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#define SMCR_MUST_CHECK __attribute__((warn_unused_result))
#define SMCR_UNUSED __attribute__((unused))
#define SMCR_NORETURN __attribute__((noreturn))
#define SMCR_COLD __attribute__((cold))
/* Symbols the preload library exports (everything else is hidden). */
#define SMCR_EXPORT __attribute__((visibility("default")))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif /* SMCR_COMMON_COMPILER_H */
