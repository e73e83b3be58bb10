// SPDX-License-Identifier: MIT
/*
 * libibverbs loaded with dlopen at the first SMC-R attempt (see ibv.h).
 *
 * The engine calls smcr_ibv_load() inside the recursion guard, so whatever
 * libibverbs and its provider do while loading (sysfs reads, netlink
 * sockets, opening /dev/infiniband) passes our wrappers untouched.  The
 * library is never unloaded: verbs objects may outlive any one connection.
 */
#include "smcr/ibv.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "common/compiler.h"
#include "common/log.h"

#define IBV_LIBRARY "libibverbs.so.1"

struct smcr_ibv_table smcr_ibv;

#define SMCR_IBV_NAME(ret, name, params) #name,
static const char *const ibv_names[] = { SMCR_IBV_SYMBOLS(SMCR_IBV_NAME) };
#undef SMCR_IBV_NAME

_Static_assert(sizeof(struct smcr_ibv_table) == ARRAY_SIZE(ibv_names) * sizeof(void (*)(void)),
	       "struct smcr_ibv_table holds exactly one function pointer per SMCR_IBV_SYMBOLS line");

static pthread_once_t ibv_once = PTHREAD_ONCE_INIT;
static int ibv_status = -ENODEV;

static void ibv_bind(void)
{
	struct smcr_ibv_table table;
	void *lib = dlopen(IBV_LIBRARY, RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		smcr_info("SMC-R unavailable: cannot load %s (%s); connections stay TCP",
			  IBV_LIBRARY, dlerror());
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(ibv_names); i++) {
		void *addr = dlsym(lib, ibv_names[i]);

		if (!addr) {
			smcr_warn("SMC-R unavailable: %s has no %s (rdma-core too old?)",
				  IBV_LIBRARY, ibv_names[i]);
			dlclose(lib);
			return;
		}
		/* POSIX: dlsym's object pointers convert to function pointers. */
		memcpy((char *)&table + i * sizeof(void (*)(void)), &addr, sizeof(addr));
	}
	smcr_ibv = table;
	ibv_status = 0;
	smcr_dbg("%s loaded for SMC-R", IBV_LIBRARY);
}

int smcr_ibv_load(void)
{
	pthread_once(&ibv_once, ibv_bind);
	return ibv_status;
}
