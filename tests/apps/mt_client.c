// SPDX-License-Identifier: MIT
/*
 * mt_client: a multi-threaded echo client in C, so that socket(), connect(),
 * send(), recv() and close() really run in parallel in one process (python
 * threads mostly take turns). Each thread opens CONNS connections one after
 * another, sends BYTES of a pattern unique to the connection in chunks of
 * varying size, reads every chunk back, and checks it.
 *
 *   mt_client HOST PORT THREADS CONNS BYTES
 *
 * Prints one summary line that is the same in every correct run; exits 0 only
 * if every byte of every connection came back.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CHUNK 65536
#define DEADLINE_SECONDS 60

struct job {
	const struct addrinfo *addr;
	unsigned first_conn;
	unsigned conns;
	size_t bytes;
	uint64_t checksum; /* sum of the echoed bytes, weighted by position */
	int failed;
};

static const size_t chunk_sizes[] = { 1, 7, 100, 1460, 4096, 16384, 65536 };

static unsigned char pattern_byte(unsigned conn, size_t pos)
{
	return (unsigned char)((conn * 131u + pos * 7u + (pos >> 8)) & 0xff);
}

static int recv_exactly(int fd, unsigned char *buf, size_t n)
{
	while (n > 0) {
		ssize_t got = recv(fd, buf, n, 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		buf += got;
		n -= (size_t)got;
	}
	return 0;
}

static int send_all(int fd, const unsigned char *buf, size_t n)
{
	while (n > 0) {
		ssize_t put = send(fd, buf, n, MSG_NOSIGNAL);

		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0)
			return -1;
		buf += put;
		n -= (size_t)put;
	}
	return 0;
}

/* One connection: returns 0 and adds to *checksum if the echo was exact. */
static int echo_one(const struct addrinfo *addr, unsigned conn, size_t bytes, uint64_t *checksum)
{
	unsigned char out[MAX_CHUNK], in[MAX_CHUNK];
	size_t pos = 0, step = conn;
	int fd = socket(addr->ai_family, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, addr->ai_addr, addr->ai_addrlen) < 0) {
		fprintf(stderr, "mt_client: connection %u: connect: %s\n", conn, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (pos < bytes) {
		size_t n = chunk_sizes[step++ % (sizeof(chunk_sizes) / sizeof(chunk_sizes[0]))];

		if (n > bytes - pos)
			n = bytes - pos;
		for (size_t i = 0; i < n; i++)
			out[i] = pattern_byte(conn, pos + i);
		if (send_all(fd, out, n) < 0 || recv_exactly(fd, in, n) < 0) {
			fprintf(stderr, "mt_client: connection %u: I/O failed at byte %zu\n", conn, pos);
			close(fd);
			return -1;
		}
		if (memcmp(in, out, n) != 0) {
			fprintf(stderr, "mt_client: connection %u: echo differs at byte %zu\n", conn, pos);
			close(fd);
			return -1;
		}
		for (size_t i = 0; i < n; i++)
			*checksum += (uint64_t)in[i] * (pos + i + 1);
		pos += n;
	}
	/* Half-close: the server ends the echo, we must then read EOF. */
	if (shutdown(fd, SHUT_WR) < 0 || recv(fd, in, 1, 0) != 0) {
		fprintf(stderr, "mt_client: connection %u: no clean EOF after the echo\n", conn);
		close(fd);
		return -1;
	}
	return close(fd);
}

static void *worker(void *arg)
{
	struct job *job = arg;

	for (unsigned c = job->first_conn; c < job->first_conn + job->conns; c++)
		if (echo_one(job->addr, c, job->bytes, &job->checksum) < 0)
			job->failed = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: mt_client HOST PORT THREADS CONNS BYTES\n");
		return 2;
	}
	unsigned threads = (unsigned)atoi(argv[3]), conns = (unsigned)atoi(argv[4]);
	size_t bytes = (size_t)atol(argv[5]);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct addrinfo *addr;
	int rc = getaddrinfo(argv[1], argv[2], &hints, &addr);

	if (rc != 0) {
		fprintf(stderr, "mt_client: %s: %s\n", argv[1], gai_strerror(rc));
		return 2;
	}
	if (threads < 1 || threads > 256 || conns < 1) {
		fprintf(stderr, "mt_client: bad THREADS or CONNS\n");
		return 2;
	}
	alarm(DEADLINE_SECONDS);

	struct job *jobs = calloc(threads, sizeof(*jobs));
	pthread_t *ids = calloc(threads, sizeof(*ids));

	if (!jobs || !ids)
		return 2;
	for (unsigned t = 0; t < threads; t++) {
		jobs[t] = (struct job){ .addr = addr, .first_conn = t * conns, .conns = conns, .bytes = bytes };
		if (pthread_create(&ids[t], NULL, worker, &jobs[t]) != 0) {
			fprintf(stderr, "mt_client: pthread_create failed\n");
			return 1;
		}
	}
	uint64_t checksum = 0;
	int failed = 0;

	for (unsigned t = 0; t < threads; t++) {
		pthread_join(ids[t], NULL);
		checksum += jobs[t].checksum;
		failed |= jobs[t].failed;
	}
	freeaddrinfo(addr);
	free(jobs);
	free(ids);
	if (failed)
		return 1;
	printf("C, %u threads: %u connections x %zu bytes echoed, checksum %llu\n", threads,
	       threads * conns, bytes, (unsigned long long)checksum);
	return 0;
}
