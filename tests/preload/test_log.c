/* SPDX-License-Identifier: MIT */
/*
 * Logging as a user sees it: with SMC_DEBUG=1 and SMCR_LOG_FILE set, the
 * library writes its start-up line "smcr: active in PROG (pid N), version
 * V" (how tests prove it was loaded) and a debug line per tracked socket
 * into that file, with the "smcr[prog pid]" prefix. Bad values are
 * reported once, and never crash. Without SMC_DEBUG nothing is written.
 *
 * The program re-executes itself with a fresh log file for each case
 * (the library reads the environment once, at start).
 */
#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>

#include "preload_test.h"

static char *read_file(const char *path)
{
	static char buf[16384];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return buf;
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return buf;
}

static int count(const char *haystack, const char *needle)
{
	int n = 0;

	for (const char *p = haystack; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/*
 * Lines of level `level` ("info") that begin with a function name ("] info:
 * detect: "): a user reads plain words at info level and above.
 */
static int lines_naming_functions(const char *log, const char *level)
{
	char tag[32];
	int n = 0;

	snprintf(tag, sizeof(tag), "] %s: ", level);
	for (const char *p = log; (p = strstr(p, tag)); p++) {
		const char *w = p + strlen(tag), *q = w;

		while ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')
			q++;
		n += q > w && q[0] == ':' && q[1] == ' ';
	}
	return n;
}

/* Runs "self --child" with the given environment additions; returns the log. */
static const char *run_child(const char *self, const char *debug, const char *extra_name,
			     const char *extra_value)
{
	static char path[] = "/tmp/smcr-log-XXXXXX";
	char copy[sizeof(path)];
	int fd, status;
	pid_t pid;

	char rundir[] = "/tmp/smcr-log-run-XXXXXX", rm[64];

	memcpy(copy, path, sizeof(path));
	fd = mkstemp(copy);
	close(fd);
	/* A fresh runtime dir: a warning said once per user session must show here. */
	CHECK(mkdtemp(rundir) != NULL);
	pid = fork();
	if (pid == 0) {
		setenv("XDG_RUNTIME_DIR", rundir, 1);
		if (debug)
			setenv("SMC_DEBUG", debug, 1);
		else
			unsetenv("SMC_DEBUG");
		setenv("SMCR_LOG_FILE", copy, 1);
		if (extra_name)
			setenv(extra_name, extra_value, 1);
		execl(self, self, "--child", (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	const char *log = read_file(copy);
	unlink(copy);
	snprintf(rm, sizeof(rm), "rm -rf %s", rundir);
	CHECK(system(rm) == 0);
	return log;
}

/* Does the line that contains `what` begin with `prefix`? */
static bool line_begins(const char *log, const char *what, const char *prefix)
{
	const char *at = strstr(log, what), *start = at;

	if (!at)
		return false;
	while (start > log && start[-1] != '\n')
		start--;
	return strncmp(start, prefix, strlen(prefix)) == 0;
}

/*
 * The child: clears its argv[0] as a server that sets its process title
 * does (PostgreSQL writes its title there, NUL-padded), then makes one TCP
 * and one UDP socket.
 */
static int child(char *argv0)
{
	int tcp, udp;
	char line[128];

	memset(argv0, 0, strlen(argv0));
	tcp = socket(AF_INET, SOCK_STREAM, 0);
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	snprintf(line, sizeof(line), "%d\n", (int)getpid());
	close(tcp);
	close(udp);
	return tcp >= 0 && udp >= 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	char expect[256];
	const char *log;

	if (argc == 2 && strcmp(argv[1], "--child") == 0)
		return child(argv[0]);
	t_watchdog(60);

	/* The start-up line and socket tracking, at debug level. */
	log = run_child(argv[0], "1", NULL, NULL);
	snprintf(expect, sizeof(expect), "smcr: active in test_log (pid ");
	CHECK(count(log, expect) == 1);
	snprintf(expect, sizeof(expect), "), version %s\n", SMCR_EXPECTED_VERSION);
	CHECK(strstr(log, expect) != NULL);
	CHECK(strstr(log, "smcr[test_log ") != NULL);
	CHECK(count(log, "AF_INET TCP socket tracked") == 1);
	/* Named as at start-up, after the program wrote over its argv[0]. */
	CHECK(line_begins(log, "AF_INET TCP socket tracked", "smcr[test_log "));
	/* Debug lines name the function (for developers), info lines do not. */
	CHECK(lines_naming_functions(log, "debug") >= 1);
	CHECK(lines_naming_functions(log, "info") == 0);
	CHECK(lines_naming_functions(log, "warning") == 0);
	if (t_failures)
		fprintf(stderr, "log was:\n%s\n", log);

	/* Level names work; info shows the start-up line, not the debug lines. */
	log = run_child(argv[0], "info", NULL, NULL);
	CHECK(count(log, "smcr: active in test_log") == 1);
	CHECK(strstr(log, "TCP socket tracked") == NULL);

	/* Default level: silent. */
	log = run_child(argv[0], NULL, NULL, NULL);
	CHECK(log[0] == '\0');

	/* A bad value is reported once, at the default level, and the program runs. */
	log = run_child(argv[0], NULL, "SMC_SNDBUF", "12q");
	CHECK(count(log, "SMC_SNDBUF=12q") == 1);
	log = run_child(argv[0], "verbose", NULL, NULL);
	CHECK(count(log, "SMC_DEBUG=verbose") == 1);
	return t_result();
}
