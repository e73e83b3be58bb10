// SPDX-License-Identifier: MIT
// cat(1), linked with -static: a program smcr can never be loaded into. An
// inetd-style server hands it an accepted connection as stdin and stdout; the
// connection must reach it as a clean TCP stream (smc_handoff.sh).
#include <unistd.h>

int main(void)
{
	static char buf[65536];
	ssize_t n;

	while ((n = read(0, buf, sizeof(buf))) > 0) {
		for (char *p = buf; n > 0;) {
			ssize_t w = write(1, p, (size_t)n);

			if (w <= 0)
				return 1;
			p += w;
			n -= w;
		}
	}
	return n < 0 ? 1 : 0;
}
