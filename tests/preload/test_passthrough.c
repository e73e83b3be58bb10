/* SPDX-License-Identifier: MIT */
/*
 * Everything the library must leave exactly as libc does it: UDP,
 * AF_UNIX, files and pipes, TCP data and readiness, the _FORTIFY_SOURCE
 * entry points, and errno, both for failing calls (exact value) and for
 * successful ones (untouched). meson runs this program twice, without and
 * with LD_PRELOAD=libsmcr.so: the expectations are libc's own behaviour,
 * so both runs passing means the library changed nothing we can see.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "preload_test.h"

ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *addrlen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		const sigset_t *mask, size_t fdslen);

static char tmpdir[] = "/tmp/smcr-passthrough-XXXXXX";

static void test_udp(void)
{
	struct sockaddr_in addr, from;
	socklen_t len = sizeof(addr), fromlen = sizeof(from);
	char buf[64];
	int fd = CHECK_OK_ERRNO_KEPT(socket(AF_INET, SOCK_DGRAM, 0));

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_OK_ERRNO_KEPT(bind(fd, (struct sockaddr *)&addr, sizeof(addr)));
	CHECK_OK_ERRNO_KEPT(getsockname(fd, (struct sockaddr *)&addr, &len));
	CHECK(CHECK_OK_ERRNO_KEPT(sendto(fd, "datagram", 8, 0, (struct sockaddr *)&addr,
					 sizeof(addr))) == 8);
	CHECK(CHECK_OK_ERRNO_KEPT(recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from,
					   &fromlen)) == 8);
	CHECK(memcmp(buf, "datagram", 8) == 0);
	CHECK(fromlen == sizeof(from) && from.sin_port == addr.sin_port);

	/* sendmmsg/recvmmsg: two datagrams at once. */
	char one[] = "one", three[] = "three";
	struct iovec iov[2] = { { one, 3 }, { three, 5 } };
	struct mmsghdr out[2] = {
		{ .msg_hdr = { .msg_name = &addr, .msg_namelen = sizeof(addr), .msg_iov = &iov[0],
			       .msg_iovlen = 1 } },
		{ .msg_hdr = { .msg_name = &addr, .msg_namelen = sizeof(addr), .msg_iov = &iov[1],
			       .msg_iovlen = 1 } },
	};
	char b0[8], b1[8];
	struct iovec riov[2] = { { b0, sizeof(b0) }, { b1, sizeof(b1) } };
	struct mmsghdr in[2] = { { .msg_hdr = { .msg_iov = &riov[0], .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &riov[1], .msg_iovlen = 1 } } };
	CHECK(sendmmsg(fd, out, 2, 0) == 2);
	CHECK(recvmmsg(fd, in, 2, MSG_WAITFORONE, NULL) >= 1);
	CHECK(in[0].msg_len == 3 && memcmp(b0, "one", 3) == 0);

	/* UDP errors: listen is not supported, recv on empty socket would block. */
	CHECK_FAILS(listen(fd, 1), EOPNOTSUPP);
	CHECK_FAILS(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	CHECK_FAILS(__recvfrom_chk(fd, buf, 8, sizeof(buf), MSG_DONTWAIT, NULL, NULL), EAGAIN);
	CHECK_OK_ERRNO_KEPT(close(fd));
}

static void test_unix(void)
{
	int sv[2];
	char buf[32];
	char ab[] = "ab", cde[] = "cde";
	struct iovec iov[2] = { { ab, 2 }, { cde, 3 } };
	char r1[3], r2[2];
	struct iovec riov[2] = { { r1, 3 }, { r2, 2 } };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int lfd, cfd, afd;

	CHECK_OK_ERRNO_KEPT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	CHECK(CHECK_OK_ERRNO_KEPT(writev(sv[0], iov, 2)) == 5);
	CHECK(CHECK_OK_ERRNO_KEPT(recv(sv[1], buf, 2, MSG_PEEK)) == 2);
	CHECK(CHECK_OK_ERRNO_KEPT(readv(sv[1], riov, 2)) == 5);
	CHECK(memcmp(r1, "abc", 3) == 0 && memcmp(r2, "de", 2) == 0);
	CHECK_OK_ERRNO_KEPT(shutdown(sv[0], SHUT_WR));
	CHECK(read(sv[1], buf, sizeof(buf)) == 0);
	struct sockaddr_storage ss;
	CHECK_FAILS(getpeername(-1, (struct sockaddr *)&ss, &(socklen_t){ sizeof(ss) }), EBADF);
	close(sv[0]);
	close(sv[1]);

	/* A named AF_UNIX stream listener: accept works as without us. */
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/sock", tmpdir);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	CHECK(listen(lfd, 4) == 0);
	cfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(connect(cfd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(afd >= 0);
	CHECK(send(cfd, "unix", 4, 0) == 4);
	CHECK(__recv_chk(afd, buf, 4, sizeof(buf), 0) == 4 && memcmp(buf, "unix", 4) == 0);
	close(afd);
	close(cfd);
	close(lfd);
}

static void test_files_and_pipes(void)
{
	char path[PATH_MAX], buf[16];
	int fd, pfd[2];

	snprintf(path, sizeof(path), "%s/file", tmpdir);
	fd = CHECK_OK_ERRNO_KEPT(open(path, O_RDWR | O_CREAT | O_TRUNC, 0640));
	CHECK(write(fd, "file contents", 13) == 13);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	CHECK(__read_chk(fd, buf, 4, sizeof(buf)) == 4 && memcmp(buf, "file", 4) == 0);
	CHECK(read(fd, buf, sizeof(buf)) == 9);
	CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDWR);
	close(fd);

	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640);
	CHECK_FAILS(open("/nonexistent/smcr", O_RDONLY), ENOENT);
	CHECK_FAILS(openat(AT_FDCWD, "/nonexistent/smcr", O_RDONLY | O_CREAT, 0600), ENOENT);
	int notsock = open(path, O_RDONLY);
	CHECK_FAILS(getsockname(notsock, (struct sockaddr *)&(struct sockaddr_storage){ 0 },
				 &(socklen_t){ sizeof(struct sockaddr_storage) }), ENOTSOCK);
	close(notsock);

	CHECK_OK_ERRNO_KEPT(pipe2(pfd, O_CLOEXEC));
	CHECK(fcntl(pfd[0], F_GETFD) == FD_CLOEXEC);
	CHECK(write(pfd[1], "pipe", 4) == 4);
	int avail = -1;
	CHECK(ioctl(pfd[0], FIONREAD, &avail) == 0 && avail == 4);
	CHECK(read(pfd[0], buf, 4) == 4);
	close(pfd[0]);
	signal(SIGPIPE, SIG_IGN);
	CHECK_FAILS(write(pfd[1], "x", 1), EPIPE);
	close(pfd[1]);
}

/* TCP data both ways, sendfile, readiness in every flavour. */
static void test_tcp(void)
{
	enum { LEN = 1 << 20 };
	static unsigned char out[LEN], in[LEN];
	int client, server, efd, file;
	char path[PATH_MAX];
	off_t off = 0;

	if (t_tcp_pair(&client, &server) < 0) {
		CHECK(!"tcp pair");
		return;
	}
	for (size_t i = 0; i < LEN; i++)
		out[i] = (unsigned char)(i * 131 + (i >> 9));
	/* 1 MiB exceeds the socket buffers: writer in a child, reader here. */
	pid_t pid = fork();
	if (pid == 0)
		_exit(t_write_all(client, out, LEN) == 0 ? 0 : 1);
	CHECK(t_read_all(server, in, LEN) == 0);
	CHECK(memcmp(in, out, LEN) == 0);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* Readiness before and after data arrives. */
	struct pollfd pfd = { .fd = server, .events = POLLIN };
	CHECK(poll(&pfd, 1, 0) == 0);
	CHECK(send(client, "ping", 4, 0) == 4);
	CHECK(poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN));
	CHECK(__poll_chk(&pfd, 1, 0, sizeof(pfd)) == 1);
	struct timespec zero = { 0, 0 };
	CHECK(ppoll(&pfd, 1, &zero, NULL) == 1);
	CHECK(__ppoll_chk(&pfd, 1, &zero, NULL, sizeof(pfd)) == 1);
	fd_set rset;
	FD_ZERO(&rset);
	FD_SET(server, &rset);
	CHECK(select(server + 1, &rset, NULL, NULL, &(struct timeval){ 0, 0 }) == 1);
	FD_SET(server, &rset);
	CHECK(pselect(server + 1, &rset, NULL, NULL, &zero, NULL) == 1);
	efd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0x5eed };
	CHECK(epoll_ctl(efd, EPOLL_CTL_ADD, server, &ev) == 0);
	struct epoll_event got;
	CHECK(epoll_wait(efd, &got, 1, 5000) == 1 && got.data.u64 == 0x5eed);
	CHECK(epoll_pwait(efd, &got, 1, 0, NULL) == 1);
	CHECK_FAILS(epoll_ctl(efd, EPOLL_CTL_ADD, server, &ev), EEXIST);
	close(efd);
	char buf[8];
	CHECK(recvfrom(server, buf, sizeof(buf), 0, NULL, NULL) == 4 && memcmp(buf, "ping", 4) == 0);

	/* sendfile from a file into the TCP socket. */
	snprintf(path, sizeof(path), "%s/sendfile", tmpdir);
	file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(write(file, out, 65536) == 65536);
	CHECK(sendfile(client, file, &off, 65536) == 65536 && off == 65536);
	CHECK(t_read_all(server, in, 65536) == 0 && memcmp(in, out, 65536) == 0);
	close(file);

	/* Socket options and names are the kernel's. */
	int one = 1, value = 0;
	socklen_t len = sizeof(value);
	CHECK(setsockopt(client, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one)) == 0);
	CHECK(getsockopt(client, IPPROTO_TCP, 1, &value, &len) == 0 && value == 1);
	CHECK_FAILS(setsockopt(client, SOL_SOCKET, 12345, &one, sizeof(one)), ENOPROTOOPT);
	struct sockaddr_in a, b;
	socklen_t la = sizeof(a), lb = sizeof(b);
	CHECK(getsockname(client, (struct sockaddr *)&a, &la) == 0);
	CHECK(getpeername(server, (struct sockaddr *)&b, &lb) == 0);
	CHECK(a.sin_port == b.sin_port);

	/* Half close: the peer reads EOF, then the connection still sends the other way. */
	CHECK(shutdown(client, SHUT_WR) == 0);
	CHECK(recv(server, buf, sizeof(buf), 0) == 0);
	CHECK(send(server, "back", 4, 0) == 4);
	CHECK(recv(client, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "back", 4) == 0);
	close(client);
	close(server);
}

/* Failing calls: exactly libc's errno. */
static void test_errno_of_failures(void)
{
	struct sockaddr_in addr;
	int lfd, fd;
	char buf[4];

	/* A port nobody listens on: take one, then close it. */
	lfd = t_listen_loopback(0, &addr);
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_FAILS(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), ECONNREFUSED);
	close(fd);

	CHECK_FAILS(read(-1, buf, 1), EBADF);
	CHECK_FAILS(read(INT_MAX, buf, 1), EBADF);
	CHECK_FAILS(write(1000000, buf, 1), EBADF);
	CHECK_FAILS(close(-1), EBADF);
	CHECK_FAILS(close(987), EBADF);
	CHECK_FAILS(close(INT_MAX), EBADF);
	CHECK_FAILS(dup(-1), EBADF);
	CHECK_FAILS(dup2(-1, 5), EBADF);
	CHECK_FAILS(dup3(0, 0, 0), EINVAL);
	CHECK_FAILS(fcntl(-1, F_GETFL), EBADF);
	CHECK_FAILS(ioctl(-1, FIONREAD, &(int){ 0 }), EBADF);
	CHECK_FAILS(socket(AF_INET, 12345, 0), EINVAL);
	CHECK_FAILS(socket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
	CHECK_FAILS(send(-1, "x", 1, 0), EBADF);
	CHECK_FAILS(recvmsg(-1, &(struct msghdr){ 0 }, 0), EBADF);
	CHECK_FAILS(sendmsg(-1, &(struct msghdr){ 0 }, 0), EBADF);
	CHECK_FAILS(epoll_ctl(-1, EPOLL_CTL_ADD, 0, &(struct epoll_event){ 0 }), EBADF);
	CHECK_FAILS(shutdown(0 + socket(AF_INET, SOCK_STREAM, 0), SHUT_RDWR), ENOTCONN);

	/* Nonblocking: accept and recv would block, connect is in progress. */
	lfd = t_listen_loopback(SOCK_NONBLOCK, &addr);
	CHECK_FAILS(accept(lfd, NULL, NULL), EAGAIN);
	CHECK_FAILS(accept4(lfd, NULL, NULL, SOCK_NONBLOCK), EAGAIN);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	errno = 0;
	int ret = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	CHECK(ret == 0 || errno == EINPROGRESS);
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	CHECK(poll(&pfd, 1, 5000) == 1);
	CHECK_FAILS(recv(fd, buf, sizeof(buf), 0), EAGAIN);
	CHECK_FAILS(read(fd, buf, sizeof(buf)), EAGAIN);
	int other = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_FAILS(bind(other, (struct sockaddr *)&addr, sizeof(addr)), EADDRINUSE);
	close(other);
	close(fd);
	close(lfd);
	/* poll reports a closed fd, it does not fail. */
	struct pollfd bad = { .fd = 555, .events = POLLIN };
	CHECK(poll(&bad, 1, 0) == 1 && bad.revents == POLLNVAL);
}

int main(void)
{
	t_watchdog(60);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return T_EXIT_FAIL;
	}
	test_udp();
	test_unix();
	test_files_and_pipes();
	test_tcp();
	test_errno_of_failures();

	static const char *const files[] = { "sock", "file", "sendfile" };
	char path[PATH_MAX];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
		unlink(path);
	}
	rmdir(tmpdir);
	return t_result();
}
