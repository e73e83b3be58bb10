/* SPDX-License-Identifier: MIT */
/* Logging (see log.h). */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/real.h"

int smcr_log_threshold = SMCR_LOG_WARN;

/* Destination file; empty = stderr. Written once by smcr_log_setup(). */
static char log_path[256];

/*
 * The program's name as it was at start-up: servers that set their process
 * title (PostgreSQL, nginx's workers) write over the argv[0] memory that
 * program_invocation_short_name points into, often with NULs.
 */
static char progname[64];

/* One line is formatted into this much stack and written in one write(). */
#define LOG_LINE_MAX 1024

static const char *const level_names[] = {
	[SMCR_LOG_ERROR] = "error",
	[SMCR_LOG_WARN] = "warning",
	[SMCR_LOG_INFO] = "info",
	[SMCR_LOG_DEBUG] = "debug",
	[SMCR_LOG_TRACE] = "trace",
};

void smcr_log_setup(int threshold, const char *path)
{
	smcr_log_threshold = threshold;
	if (!progname[0] && program_invocation_short_name)
		snprintf(progname, sizeof(progname), "%s", program_invocation_short_name);
	if (path && *path && strlen(path) < sizeof(log_path))
		memcpy(log_path, path, strlen(path) + 1);
	else
		log_path[0] = '\0';
}

bool smcr_log_opens_file(void)
{
	return log_path[0] != '\0';
}

void smcr_log_quiet(void)
{
	smcr_log_threshold = SMCR_LOG_ERROR - 1;
}

const char *smcr_log_progname(void)
{
	if (progname[0])
		return progname;
	return program_invocation_short_name ? program_invocation_short_name : "?";
}

static void emit(const char *line, size_t len)
{
	int fd = 2;

	if (!smcr_real_is_bound())
		return;
	if (log_path[0]) {
		fd = smcr_real.open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			return;
	}
	/* A short write to a log is not worth a retry loop. */
	(void)!smcr_real.write(fd, line, len);
	if (fd != 2)
		smcr_real.close(fd);
}

static size_t clamp_len(int n, size_t room)
{
	if (n < 0)
		return 0;
	return (size_t)n < room ? (size_t)n : room - 1;
}

/* The message after the `len` bytes already in `line`, cut to fit its newline, out. */
__attribute__((format(printf, 3, 0)))
static void emit_formatted(char line[LOG_LINE_MAX], size_t len, const char *fmt, va_list ap)
{
	len += clamp_len(vsnprintf(line + len, LOG_LINE_MAX - len, fmt, ap), LOG_LINE_MAX - len);
	if (len >= LOG_LINE_MAX - 1)
		len = LOG_LINE_MAX - 2;
	line[len++] = '\n';
	emit(line, len);
}

void smcr_log_write(int level, const char *func, const char *fmt, ...)
{
	int saved_errno = errno;
	char line[LOG_LINE_MAX];
	size_t len;
	va_list ap;

	if (level < SMCR_LOG_ERROR)
		level = SMCR_LOG_ERROR;
	if (level > SMCR_LOG_TRACE)
		level = SMCR_LOG_TRACE;
	/* Function names help a developer at debug level; a user reads plain words. */
	if (level >= SMCR_LOG_DEBUG)
		len = clamp_len(snprintf(line, sizeof(line), "smcr[%s %d] %s: %s: ",
					 smcr_log_progname(), (int)getpid(), level_names[level],
					 func),
				sizeof(line));
	else
		len = clamp_len(snprintf(line, sizeof(line), "smcr[%s %d] %s: ", smcr_log_progname(),
					 (int)getpid(), level_names[level]),
				sizeof(line));
	va_start(ap, fmt);
	emit_formatted(line, len, fmt, ap);
	va_end(ap);
	errno = saved_errno;
}

void smcr_log_line(const char *fmt, ...)
{
	int saved_errno = errno;
	char line[LOG_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	emit_formatted(line, 0, fmt, ap);
	va_end(ap);
	errno = saved_errno;
}
