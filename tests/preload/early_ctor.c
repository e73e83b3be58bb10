/* SPDX-License-Identifier: MIT */
/*
 * A library whose constructor uses sockets. The test program links it, so
 * the dynamic loader runs this constructor before libsmcr.so's (needed
 * libraries are initialised before preloaded ones): the wrappers are then
 * called before the library's constructor, and must work.
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

int early_ctor_tcp_fd = -1;
int early_ctor_udp_fd = -1;
int early_ctor_ran;

__attribute__((constructor)) static void early_ctor(void)
{
	int fd = open("/dev/null", O_RDONLY);

	early_ctor_tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
	early_ctor_udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
	close(fd);
	early_ctor_ran = 1;
}
