// SPDX-License-Identifier: MIT
/*
 * raw_uring_client PORT BYTES: io_uring without liburing, set up through
 * libc's syscall() as Rust's io-uring crate does.  Against an echo server on
 * 127.0.0.1:PORT:
 *   1. connection A echoes BYTES through send()/recv() (the library's
 *      wrappers see it: SMC when both ends run smcr);
 *   2. io_uring_setup();
 *   3. A echoes BYTES more through IORING_OP_SEND / IORING_OP_RECV;
 *   4. connection B, made after the setup, echoes BYTES through io_uring.
 * Every byte is checked.  Prints "ok BYTES" and exits 0, or says what failed.
 */
#include <arpa/inet.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r, unsigned entries)
{
	struct io_uring_params p;
	size_t sq_len, cq_len;
	uint8_t *sq, *cq;

	memset(&p, 0, sizeof(p));
	r->fd = (int)syscall(SYS_io_uring_setup, entries, &p);
	if (r->fd < 0)
		return -1;
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if ((p.features & IORING_FEAT_SINGLE_MMAP) && cq_len > sq_len)
		sq_len = cq_len;
	sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		  IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		return -1;
	cq = sq;
	if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
		cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
			  IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			return -1;
	}
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		return -1;
	r->sq_tail = (unsigned *)(void *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned *)(void *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(void *)(sq + p.sq_off.array);
	r->cq_head = (unsigned *)(void *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned *)(void *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned *)(void *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(void *)(cq + p.cq_off.cqes);
	return 0;
}

/* One operation through the ring, waited for: its result (bytes or -errno). */
static int ring_op(struct ring *r, int opcode, int fd, void *buf, size_t len)
{
	unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask, head;
	struct io_uring_sqe *sqe = &r->sqes[idx];
	int res;

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = (uint8_t)opcode;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)buf;
	sqe->len = (unsigned)len;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return -1;
	head = __atomic_load_n(r->cq_head, __ATOMIC_ACQUIRE);
	while (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		if (syscall(SYS_io_uring_enter, r->fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
			return -1;
	res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 9));
}

/* A chunk out, then its echo back, BYTES in all: through `ring`, or plain calls if NULL. */
static int echo(struct ring *ring, int fd, size_t total, const char *what)
{
	unsigned char *out = malloc(total), *in = malloc(total);
	size_t sent = 0, got = 0;

	if (!out || !in)
		return fprintf(stderr, "%s: out of memory\n", what), -1;
	for (size_t i = 0; i < total; i++)
		out[i] = pattern(i + total);
	while (got < total) {
		size_t chunk = total - sent < 16384 ? total - sent : 16384;
		ssize_t n = 0;

		if (sent < total)
			n = ring ? ring_op(ring, IORING_OP_SEND, fd, out + sent, chunk)
				 : send(fd, out + sent, chunk, 0);
		if (n < 0)
			return fprintf(stderr, "%s: send failed (%zd)\n", what, n), -1;
		sent += (size_t)n;
		while (got < sent) {
			n = ring ? ring_op(ring, IORING_OP_RECV, fd, in + got, sent - got)
				 : recv(fd, in + got, sent - got, 0);
			if (n <= 0)
				return fprintf(stderr, "%s: recv %zd after %zu bytes\n", what, n, got),
				       -1;
			got += (size_t)n;
		}
	}
	if (memcmp(in, out, total) != 0)
		return fprintf(stderr, "%s: the echo differs\n", what), -1;
	free(out);
	free(in);
	return 0;
}

static int connect_to(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		return perror("connect"), -1;
	return fd;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct ring ring;
	size_t total;
	int a, b;

	if (argc != 3)
		return fprintf(stderr, "usage: raw_uring_client PORT BYTES\n"), 2;
	sa.sin_port = htons((unsigned short)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	total = strtoul(argv[2], NULL, 10);
	a = connect_to(&sa);
	if (a < 0 || echo(NULL, a, total, "A before io_uring") < 0)
		return 1;
	if (ring_init(&ring, 8) < 0)
		return perror("io_uring_setup"), 1;
	if (echo(&ring, a, total, "A through io_uring") < 0)
		return 1;
	b = connect_to(&sa);
	if (b < 0 || echo(&ring, b, total, "B through io_uring") < 0)
		return 1;
	printf("ok %zu\n", total);
	close(a);
	close(b);
	return 0;
}
