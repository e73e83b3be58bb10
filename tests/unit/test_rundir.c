// SPDX-License-Identifier: MIT
/*
 * The shared runtime directory (src/smcr/rundir.c): what a client believes of
 * an entry, written as the attacks: a stale file, a symlink, a regular file,
 * a directory others may write without the sticky bit, a file of another
 * uid (as root), and the rendezvous names' life.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "smcr/rundir.h"

#define NOBODY 65534
#define PORT 4711

static char dir[64];

static struct sockaddr_storage peer(void)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(PORT);
	inet_pton(AF_INET, "10.201.0.1", &in->sin_addr);
	return ss;
}

static void entry_path(char *out, size_t len)
{
	snprintf(out, len, "%s/l-10.201.0.1-%u", dir, PORT);
}

/* A listening seqpacket socket bound at `path`; closed at once unless `keep`. */
static int bound_socket(const char *path, bool keep)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 0), 0);
	if (!keep) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool vouches(void)
{
	struct sockaddr_storage ss = peer();

	return smcr_rundir_vouches(-1, &ss);
}

static void test_absent_live_stale(void **state)
{
	char path[128];
	int fd;

	(void)state;
	entry_path(path, sizeof(path));
	assert_false(vouches());
	fd = bound_socket(path, true);
	assert_true(vouches());
	/* A listener that never accepts: its backlog fills, and it is still live. */
	for (int i = 0; i < 4; i++)
		assert_true(vouches());
	close(fd);
	/* The file of a dead listener: refused at once. */
	assert_false(vouches());
	unlink(path);
}

static void test_symlink_and_regular_file(void **state)
{
	char path[128], real[128];
	int fd;

	(void)state;
	entry_path(path, sizeof(path));
	snprintf(real, sizeof(real), "%s/elsewhere", dir);
	fd = bound_socket(real, true);
	assert_int_equal(symlink(real, path), 0);
	assert_false(vouches());
	unlink(path);
	fd = (close(fd), open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	assert_true(fd >= 0);
	close(fd);
	assert_false(vouches());
	unlink(path);
	unlink(real);
}

static void test_directory_mode(void **state)
{
	char path[128];
	int fd;

	(void)state;
	entry_path(path, sizeof(path));
	fd = bound_socket(path, true);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_false(vouches()); /* others may replace any entry */
	assert_int_equal(chmod(dir, 01777), 0);
	assert_true(vouches());
	assert_int_equal(chmod(dir, 0700), 0);
	assert_true(vouches());
	close(fd);
	unlink(path);
}

static void test_other_uid(void **state)
{
	char path[128];
	int fd;

	(void)state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	entry_path(path, sizeof(path));
	assert_int_equal(chmod(dir, 01777), 0);
	fd = bound_socket(path, true);
	assert_int_equal(lchown(path, NOBODY, NOBODY), 0);
	assert_false(vouches()); /* a file of nobody's */
	assert_int_equal(lchown(path, 0, 0), 0);
	assert_true(vouches());
	close(fd);
	unlink(path);
	assert_int_equal(chmod(dir, 0700), 0);
}

static void test_rendezvous_names(void **state)
{
	char path[128];
	struct stat st;
	int l, c;

	(void)state;
	snprintf(path, sizeof(path), "%s/rv-00000000000000ab", dir);
	l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(l >= 0 && c >= 0);
	assert_int_equal(smcr_rundir_rv_bind(l, 0xab), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0666); /* a peer of any uid may knock */
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(smcr_rundir_rv_connect(c, 0xab), 0);
	close(c);
	c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_int_equal(smcr_rundir_rv_connect(c, 0xac), -1);
	assert_int_equal(errno, ENOENT);
	close(c);
	close(l);
	smcr_rundir_rv_unlink(0xab);
	assert_int_equal(stat(path, &st), -1);
}

static int teardown(void **state)
{
	(void)state;
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_absent_live_stale),
		cmocka_unit_test(test_symlink_and_regular_file),
		cmocka_unit_test(test_directory_mode),
		cmocka_unit_test(test_other_uid),
		cmocka_unit_test(test_rendezvous_names),
	};

	snprintf(dir, sizeof(dir), "/tmp/smcr-rundir-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	/* Read once, at the library's first look at its configuration. */
	setenv("SMCR_RUNDIR", dir, 1);
	return cmocka_run_group_tests_name("rundir", tests, NULL, teardown);
}
