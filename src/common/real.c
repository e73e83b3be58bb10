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
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
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
/*
 * Non-zero while this thread is binding. Something dlsym calls (a
 * sanitizer runtime, a malloc) may reach one of our wrappers, which needs
 * the table: it is then filled again, directly, on this thread.
 */
static __thread unsigned binding_depth __attribute__((tls_model("initial-exec")));
#define BINDING_MAX_NESTING 3

/*
 * Fatal problems before the table exists: write(2) cannot be used yet, so
 * the message goes out through libc's syscall(), looked up here: the public
 * name is the library's own wrapper (wrap_seccomp.c), which needs the table.
 */
static SMCR_NORETURN SMCR_COLD void die(const char *what, const char *name)
{
	const char *parts[] = { "smcr: fatal: ", what, " '", name, "'; aborting\n" };
	void *addr = dlsym(RTLD_NEXT, "syscall");
	long (*sys)(long, ...);

	if (addr && !smcr_real_is_own_symbol(addr)) {
		memcpy(&sys, &addr, sizeof(sys));
		for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
			sys(SYS_write, 2, parts[i], strlen(parts[i]));
	}
	abort();
}

/*
 * The address range of the object this code is linked into, from its own
 * program headers (the linker defines __ehdr_start in every object). Far
 * cheaper than dladdr(), which scans a symbol table per call and made the
 * start-up of every process ~7 million instructions slower.
 */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));

bool smcr_real_is_own_symbol(const void *addr)
{
	/* Declared as bytes: the header is followed by the program headers. */
	const ElfW(Ehdr) *ehdr = (const ElfW(Ehdr) *)__ehdr_start;
	const ElfW(Phdr) *phdr = (const ElfW(Phdr) *)(__ehdr_start + ehdr->e_phoff);
	uintptr_t low = UINTPTR_MAX, high = 0, bias = 0, where = (uintptr_t)addr;
	bool have_bias = false;

	for (unsigned i = 0; i < ehdr->e_phnum; i++) {
		if (phdr[i].p_type != PT_LOAD)
			continue;
		if (phdr[i].p_vaddr < low)
			low = phdr[i].p_vaddr;
		if (phdr[i].p_vaddr + phdr[i].p_memsz > high)
			high = phdr[i].p_vaddr + phdr[i].p_memsz;
		/* The segment mapping file offset 0 holds the ELF header. */
		if (phdr[i].p_offset == 0) {
			bias = (uintptr_t)ehdr - phdr[i].p_vaddr;
			have_bias = true;
		}
	}
	if (!have_bias)
		return false;
	return where >= bias + low && where < bias + high;
}

static void bind_symbols(void)
{
	binding_depth++;
	for (size_t i = 0; i < ARRAY_SIZE(real_symbols); i++) {
		const struct real_symbol *sym = &real_symbols[i];
		void *addr = dlsym(RTLD_NEXT, sym->name);

		if (!addr && sym->mandatory)
			die("libc symbol not found", sym->name);
		if (addr && smcr_real_is_own_symbol(addr))
			die("dlsym(RTLD_NEXT) returned our own wrapper for", sym->name);
		memcpy((char *)&smcr_real + sym->offset, &addr, sizeof(addr));
	}
	binding_depth--;
}

static void bind_all(void)
{
	bind_symbols();
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
	if (binding_depth > 0) {
		/* Re-entered from inside dlsym on this thread: pthread_once would deadlock. */
		if (binding_depth >= BINDING_MAX_NESTING)
			die("libc symbol lookup keeps re-entering the library", "dlsym");
		bind_symbols();
		return;
	}
	pthread_once(&bind_once, bind_all);
}
