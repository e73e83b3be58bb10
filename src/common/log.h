/* SPDX-License-Identifier: MIT */
/*
 * Levelled logging: "smcr[prog pid] level: message" on stderr or in
 * SMCR_LOG_FILE. The threshold is set once from the configuration; the
 * macros test it inline, so a disabled message costs one compare and
 * formats nothing. Logging never changes errno and never calls a wrapped
 * name (it writes through smcr_real).
 */
#ifndef SMCR_COMMON_LOG_H
#define SMCR_COMMON_LOG_H

#include <stdbool.h>

#include "common/compiler.h"

enum smcr_log_level {
	SMCR_LOG_ERROR = 0,
	SMCR_LOG_WARN = 1,
	SMCR_LOG_INFO = 2,
	SMCR_LOG_DEBUG = 3,
	SMCR_LOG_TRACE = 4,
};

/* Messages with level <= threshold are written. Default: warnings. */
extern int smcr_log_threshold;

/*
 * Sets the threshold and the destination (path NULL or "" = stderr).
 * A log file is opened per message (O_APPEND), so programs that close
 * every fd or dup2 over 2 cannot make us write into their files.
 * Requires smcr_real_bind() to have run.
 */
void smcr_log_setup(int threshold, const char *path);

/* Does a log line open a file (SMCR_LOG_FILE), or go to stderr? */
bool smcr_log_opens_file(void);

/* No more log lines in this process (its system calls are confined). */
void smcr_log_quiet(void);

void smcr_log_write(int level, const char *func, const char *fmt, ...) SMCR_PRINTF(3, 4);

/* A line without prefix (the start-up banner tests look for). */
void smcr_log_line(const char *fmt, ...) SMCR_PRINTF(1, 2);

/* Short program name used in prefixes ("nginx"). */
const char *smcr_log_progname(void);

#define smcr_log_enabled(level) ((level) <= smcr_log_threshold)

#define smcr_log(level, ...)                                            \
	do {                                                            \
		if (unlikely(smcr_log_enabled(level)))                  \
			smcr_log_write((level), __func__, __VA_ARGS__); \
	} while (0)

#define smcr_err(...)   smcr_log(SMCR_LOG_ERROR, __VA_ARGS__)
#define smcr_warn(...)  smcr_log(SMCR_LOG_WARN, __VA_ARGS__)
#define smcr_info(...)  smcr_log(SMCR_LOG_INFO, __VA_ARGS__)
#define smcr_dbg(...)   smcr_log(SMCR_LOG_DEBUG, __VA_ARGS__)
#define smcr_trace(...) smcr_log(SMCR_LOG_TRACE, __VA_ARGS__)

#endif /* SMCR_COMMON_LOG_H */
