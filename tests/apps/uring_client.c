// SPDX-License-Identifier: MIT
/*
 * uring_client PORT BYTES: connects to 127.0.0.1:PORT with connect(), then
 * sends BYTES of a pattern and reads the echo back through io_uring
 * (IORING_OP_SEND / IORING_OP_RECV, as io_uring servers and clients do),
 * checking every byte. Prints "ok BYTES" and exits 0, or says what failed.
 */
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 9));
}

/* One operation through the ring: its result (bytes or -errno). */
static int ring_op(struct io_uring *ring, int fd, void *buf, size_t len, bool send)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int res;

	if (send)
		io_uring_prep_send(sqe, fd, buf, len, 0);
	else
		io_uring_prep_recv(sqe, fd, buf, len, 0);
	if (io_uring_submit(ring) != 1 || io_uring_wait_cqe(ring, &cqe) != 0)
		return -1;
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct io_uring ring;
	size_t total, sent = 0, got = 0;
	unsigned char *out, *in;
	int fd;

	if (argc != 3)
		return fprintf(stderr, "usage: uring_client PORT BYTES\n"), 2;
	sa.sin_port = htons((unsigned short)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	total = strtoul(argv[2], NULL, 10);
	out = malloc(total);
	in = malloc(total);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (!out || !in || fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return perror("connect"), 1;
	if (io_uring_queue_init(8, &ring, 0) < 0)
		return fprintf(stderr, "io_uring_queue_init failed\n"), 1;
	for (size_t i = 0; i < total; i++)
		out[i] = pattern(i);
	/* A chunk out, then its echo back: the server echoes what it reads. */
	while (got < total) {
		size_t chunk = total - sent < 16384 ? total - sent : 16384;
		int n = sent < total ? ring_op(&ring, fd, out + sent, chunk, true) : 0;

		if (n < 0)
			return fprintf(stderr, "send: %s\n", strerror(-n)), 1;
		sent += (size_t)n;
		while (got < sent) {
			n = ring_op(&ring, fd, in + got, sent - got, false);
			if (n <= 0)
				return fprintf(stderr, "recv: %s after %zu bytes\n",
					       n ? strerror(-n) : "end of stream", got), 1;
			got += (size_t)n;
		}
	}
	if (memcmp(in, out, total) != 0)
		return fprintf(stderr, "the echo differs\n"), 1;
	printf("ok %zu\n", total);
	io_uring_queue_exit(&ring);
	close(fd);
	return 0;
}
