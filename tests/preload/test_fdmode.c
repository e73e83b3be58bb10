/* SPDX-License-Identifier: MIT */
/*
 * What the library tracks, as the program sees it through smc_preload.h:
 * TCP stream sockets (v4, v6, with type flags, protocol 0 or TCP) and the
 * connections accepted on them are candidates; UDP, AF_UNIX, files are
 * not. dup/dup2/dup3/F_DUPFD copies share the state, closing one copy
 * keeps the other, and a number the kernel reuses after libc closed it
 * behind our back (a raw close system call here) is forgotten.
 * Every name in preload.map resolves to libsmcr.so, nothing else does.
 *
 * usage: test_fdmode MAP            library preloaded and active
 *        test_fdmode --inactive     preloaded with SMCR_DISABLE=1
 *        test_fdmode --absent       not preloaded: the weak API is NULL
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pty.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "smc_preload.h"
#include "preload_test.h"

#define CANDIDATE SMC_PRELOAD_FD_CANDIDATE
#define UNTRACKED SMC_PRELOAD_FD_UNTRACKED

static int mode(int fd)
{
	return smc_preload_fd_mode(fd);
}

static void test_what_is_tracked(void)
{
	int fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(mode(fd) == CANDIDATE);
	close(fd);
	CHECK(mode(fd) == UNTRACKED);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
	CHECK(mode(fd) == CANDIDATE);
	close(fd);
	fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd >= 0) { /* no IPv6 in this namespace: nothing to check */
		CHECK(mode(fd) == CANDIDATE);
		close(fd);
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(mode(fd) == UNTRACKED);
	close(fd);
	fd = socket(AF_INET6, SOCK_DGRAM, IPPROTO_UDP);
	if (fd >= 0) {
		CHECK(mode(fd) == UNTRACKED);
		close(fd);
	}
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(mode(fd) == UNTRACKED);
	close(fd);
	fd = socket(AF_INET, SOCK_STREAM, 262 /* IPPROTO_MPTCP */);
	if (fd >= 0) {
		CHECK(mode(fd) == UNTRACKED);
		close(fd);
	}
	fd = open("/dev/null", O_RDONLY);
	CHECK(mode(fd) == UNTRACKED);
	close(fd);
	CHECK(mode(-1) == UNTRACKED);
	CHECK(mode(1 << 30) == UNTRACKED);

	/* Accepted connections of a tracked listener are tracked. */
	int client = -1, server = -1;
	CHECK(t_tcp_pair(&client, &server) == 0);
	/* Connected to a listener of this very process: decided at once, TCP. */
	CHECK(mode(client) == SMC_PRELOAD_FD_FALLBACK);
	CHECK(mode(server) == CANDIDATE);
	close(client);
	close(server);
}

static void test_dup_family(void)
{
	int sock = socket(AF_INET, SOCK_STREAM, 0);
	int file = open("/dev/null", O_RDONLY);
	int copy, copy2, copy3, copy4;

	copy = dup(sock);
	CHECK(mode(copy) == CANDIDATE);
	copy2 = fcntl(sock, F_DUPFD, 100);
	CHECK(copy2 >= 100 && mode(copy2) == CANDIDATE);
	copy3 = fcntl(sock, F_DUPFD_CLOEXEC, 0);
	CHECK(mode(copy3) == CANDIDATE);
	/* dup2 onto a file fd: the kernel closes the file, the number becomes the socket. */
	CHECK(dup2(sock, file) == file);
	CHECK(mode(file) == CANDIDATE);
	copy4 = file;
	/* Close the original: the copies stay tracked. */
	close(sock);
	CHECK(mode(sock) == UNTRACKED);
	CHECK(mode(copy) == CANDIDATE && mode(copy2) == CANDIDATE && mode(copy3) == CANDIDATE &&
	      mode(copy4) == CANDIDATE);
	/* dup3 of a file over a tracked copy: that copy is no longer a socket. */
	int devnull = open("/dev/null", O_RDONLY);
	CHECK(dup3(devnull, copy2, O_CLOEXEC) == copy2);
	CHECK(mode(copy2) == UNTRACKED);
	CHECK(mode(copy) == CANDIDATE);
	/* dup2(fd, fd) changes nothing. */
	CHECK(dup2(copy, copy) == copy && mode(copy) == CANDIDATE);
	/* A failing dup2 changes nothing either. */
	CHECK_FAILS(dup2(copy, -1), EBADF);
	CHECK(mode(copy) == CANDIDATE);
	close(copy);
	close(copy2);
	close(copy3);
	close(copy4);
	close(devnull);

	/* close_range forgets, CLOSE_RANGE_CLOEXEC does not. */
	int a = socket(AF_INET, SOCK_STREAM, 0);
	int b = dup2(a, 200);
	CHECK(b == 200);
	CHECK(close_range(200, 200, 4 /* CLOSE_RANGE_CLOEXEC */) == 0);
	CHECK(mode(200) == CANDIDATE && fcntl(200, F_GETFD) == FD_CLOEXEC);
	CHECK(close_range(150, 250, 0) == 0);
	CHECK(mode(200) == UNTRACKED && mode(a) == CANDIDATE);
	close(a);

	/* closefrom in a child (it would close the harness's fds here). */
	pid_t pid = fork();
	if (pid == 0) {
		int s = dup2(socket(AF_INET, SOCK_STREAM, 0), 300);
		closefrom(250);
		_exit(s == 300 && mode(300) == UNTRACKED && fcntl(300, F_GETFD) == -1 ? 0 : 1);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * libc may close an fd without calling close() (fclose of an fdopen'ed
 * socket); a raw system call plays that part. Whatever the kernel hands
 * that number out for next must not inherit the socket's state.
 */
static void test_stale_entries_cleared(void)
{
	static const char *const creators[] = {
		"open", "pipe", "epoll_create1", "eventfd", "socket(AF_UNIX)", "socket(UDP)",
		"openpty",
	};

	for (size_t i = 0; i < sizeof(creators) / sizeof(creators[0]); i++) {
		int sock = socket(AF_INET, SOCK_STREAM, 0), fd = -1, pfd[2];

		CHECK(mode(sock) == CANDIDATE);
		syscall(SYS_close, sock);
		switch (i) {
		case 0: fd = open("/dev/null", O_RDONLY); break;
		case 1: fd = pipe(pfd) == 0 ? pfd[0] : -1; break;
		case 2: fd = epoll_create1(0); break;
		case 3: fd = eventfd(0, 0); break;
		case 4: fd = socket(AF_UNIX, SOCK_DGRAM, 0); break;
		case 5: fd = socket(AF_INET, SOCK_DGRAM, 0); break;
		case 6: fd = openpty(&pfd[0], &pfd[1], NULL, NULL, NULL) == 0 ? pfd[0] : -1; break;
		}
		if (fd != sock) {
			fprintf(stderr, "%s: got fd %d, not the reused %d\n", creators[i], fd,
				sock);
			t_failures++;
		}
		CHECK(mode(fd) == UNTRACKED);
		if (i == 1 || i == 6)
			close(pfd[1]);
		close(fd);
	}

	/* A new TCP socket on a stale number gets fresh state. */
	int sock = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(dup2(sock, 400) == 400);
	syscall(SYS_close, 400);
	CHECK(dup2(socket(AF_INET, SOCK_STREAM, 0), 400) == 400);
	CHECK(mode(400) == CANDIDATE);
	close(400);
	close(sock);
}

/*
 * A library preloaded before us (a sanitizer runtime) may define the same
 * name; its interceptor then reaches ours through RTLD_NEXT. That is the
 * only acceptable owner other than libsmcr.so itself.
 */
static bool preloaded_before_us(const char *path)
{
	const char *preload = getenv("LD_PRELOAD"), *ours, *theirs;

	if (!preload)
		return false;
	ours = strstr(preload, "libsmcr.so");
	theirs = strstr(preload, path);
	return ours && theirs && theirs < ours;
}

/*
 * Each name in the version script is defined by libsmcr.so and is what the
 * program calls; internals are not visible.
 */
static void test_exports(const char *map_path)
{
	FILE *map = fopen(map_path, "r");
	char line[256], name[128];
	Dl_info self;
	void *lib;
	int names = 0;

	if (!map || !dladdr((void *)smc_preload_version, &self) ||
	    !(lib = dlopen(self.dli_fname, RTLD_NOLOAD | RTLD_LAZY))) {
		fprintf(stderr, "cannot open %s or find libsmcr.so\n", map_path);
		t_failures++;
		return;
	}
	while (fgets(line, sizeof(line), map)) {
		Dl_info info;
		void *ours, *called;

		if (sscanf(line, " %127[A-Za-z0-9_];", name) != 1 || strchr(line, ':') ||
		    strchr(line, '*'))
			continue;
		names++;
		ours = dlsym(lib, name);
		if (!ours || !dladdr(ours, &info) || info.dli_fbase != self.dli_fbase) {
			fprintf(stderr, "%s: not defined by libsmcr.so\n", name);
			t_failures++;
			continue;
		}
		called = dlsym(RTLD_DEFAULT, name);
		if (called != ours &&
		    !(called && dladdr(called, &info) && preloaded_before_us(info.dli_fname))) {
			fprintf(stderr, "%s: the program calls %s, not libsmcr.so\n", name,
				called && dladdr(called, &info) ? info.dli_fname : "nothing");
			t_failures++;
		}
	}
	fclose(map);
	dlclose(lib);
	CHECK(names > 60);
	CHECK(dlsym(RTLD_DEFAULT, "smcr_fdtab_track") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "smcr_real") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "smcr_log_write") == NULL);
}

int main(int argc, char **argv)
{
	t_watchdog(60);
	if (argc == 2 && strcmp(argv[1], "--absent") == 0) {
		/* The header's weak declarations let a program run without the library. */
		CHECK(smc_preload_version == NULL);
		CHECK(smc_preload_fd_mode == NULL);
		return t_result();
	}
	if (!smc_preload_version || !dlsym(RTLD_DEFAULT, "smc_preload_version")) {
		fprintf(stderr, "libsmcr.so is not loaded (LD_PRELOAD=%s)\n",
			getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
		return T_EXIT_FAIL;
	}
	CHECK(strcmp(smc_preload_version(), SMCR_EXPECTED_VERSION) == 0);
	if (argc == 2 && strcmp(argv[1], "--inactive") == 0) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		CHECK(smc_preload_active() == 0);
		CHECK(mode(fd) == UNTRACKED);
		close(fd);
		return t_result();
	}
	if (argc != 2) {
		fprintf(stderr, "usage: %s MAP | --inactive | --absent\n", argv[0]);
		return T_EXIT_FAIL;
	}
	CHECK(smc_preload_active() == 1);
	test_what_is_tracked();
	test_dup_family();
	test_stale_entries_cleared();
	test_exports(argv[1]);
	return t_result();
}
