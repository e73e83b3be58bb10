// SPDX-License-Identifier: MIT
/*
 * Host-local registry of smcr listeners (design §4: propose only to a peer
 * known to speak SMC).  A listener binds an abstract UNIX datagram socket
 * "smcr/l/<netns inode>/<port>"; a client connecting to a local address checks
 * for the name with connect() on a datagram socket, which succeeds exactly
 * when the name is bound and costs no backlog on the listener's side.
 * Abstract names are per network namespace and vanish with the last process
 * holding the socket, so a crashed server leaves nothing behind.
 *
 * Known limit: abstract names carry no owner, so a local user could register
 * a port it does not serve and make local smcr clients propose to that port's
 * real (plain TCP) server.  Closing that needs the TCP listener's owner check
 * (sock_diag), left as an open point.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/real.h"
#include "smcr/shm.h"
#include "smcr/sys.h"

static unsigned long long netns_inode(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

static socklen_t registry_name(uint16_t port, struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "smcr/l/%llu/%u",
		     netns_inode(), (unsigned)port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int smcr_registry_add(uint16_t port)
{
	struct sockaddr_un sa;
	socklen_t len = registry_name(port, &sa);
	int fd;

	smcr_real_bind();
	fd = smcr_real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (smcr_real.bind(fd, (struct sockaddr *)&sa, len) < 0) {
		int err = -errno;

		smcr_sys_close(fd);
		return err;
	}
	return fd;
}

bool smcr_registry_has(uint16_t port)
{
	struct sockaddr_un sa;
	socklen_t len = registry_name(port, &sa);
	bool found;
	int fd;

	smcr_real_bind();
	fd = smcr_real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	found = smcr_real.connect(fd, (struct sockaddr *)&sa, len) == 0;
	smcr_sys_close(fd);
	return found;
}
