/* SPDX-License-Identifier: MIT */
/*
 * Binding of the real libc entry points (see real.h).
 *
 * Why dlsym(RTLD_NEXT) and not dlopen("libc.so.6"): RTLD_NEXT finds
 * whatever comes after us in the lookup order, so another interposer
 * loaded after us (or a sanitizer runtime loaded before us) keeps working,
 * and no dlopen() runs inside a constructor (which is what upsets gdb and
 * valgrind in socket_wrapper's experience). Binding is lazy, under
 * pthread_once, because wrappers can be called by other libraries'
 * constructors before our own constructor has run.
 */
#include "common/real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/compiler.h"

struct smcr_real_table smcr_real;

struct real_symbol {
	const char *name;
	size_t offset; /* of the pointer inside struct smcr_real_table */
	bool mandatory;
};

#define SMCR_REAL_ENTRY(ret, name, params, is_mandatory) \
	{ #name, offsetof(struct smcr_real_table, name), is_mandatory },
static const struct real_symbol real_symbols[] = {
	SMCR_REAL_SYMBOLS(SMCR_REAL_ENTRY)
};
#undef SMCR_REAL_ENTRY

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static atomic_bool bound;
/* Set while this thread runs dlsym(): re-entry there cannot be served. */
static __thread bool binding_in_progress __attribute__((tls_model("initial-exec")));

/*
 * Fatal problems before the table exists: write(2) cannot be used yet, so
 * the message goes out through the raw system call.
 */
static SMCR_NORETURN SMCR_COLD void die(const char *what, const char *name)
{
	const char *parts[] = { "smcr: fatal: ", what, " '", name, "'; aborting\n" };

	for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
		syscall(SYS_write, 2, parts[i], strlen(parts[i]));
	abort();
}

bool smcr_real_is_own_symbol(const void *addr)
{
	Dl_info mine, theirs;

	if (!dladdr((const void *)smcr_real_is_own_symbol, &mine) || !dladdr(addr, &theirs))
		return false;
	return mine.dli_fbase == theirs.dli_fbase;
}

static void bind_all(void)
{
	binding_in_progress = true;
	for (size_t i = 0; i < ARRAY_SIZE(real_symbols); i++) {
		const struct real_symbol *sym = &real_symbols[i];
		void *addr = dlsym(RTLD_NEXT, sym->name);

		if (!addr && sym->mandatory)
			die("libc symbol not found", sym->name);
		if (addr && smcr_real_is_own_symbol(addr))
			die("dlsym(RTLD_NEXT) returned our own wrapper for", sym->name);
		memcpy((char *)&smcr_real + sym->offset, &addr, sizeof(addr));
	}
	binding_in_progress = false;
	atomic_store_explicit(&bound, true, memory_order_release);
}

bool smcr_real_is_bound(void)
{
	return atomic_load_explicit(&bound, memory_order_acquire);
}

void smcr_real_bind(void)
{
	if (likely(smcr_real_is_bound()))
		return;
	if (binding_in_progress)
		die("libc symbol lookup re-entered the library while binding", "dlsym");
	pthread_once(&bind_once, bind_all);
}
