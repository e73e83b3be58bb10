/* SPDX-License-Identifier: MIT */
/*
 * smc_preload.h - what a program can ask libsmcr.so at run time.
 *
 * libsmcr.so is loaded with LD_PRELOAD (scripts/smc_run), so programs do
 * not link against it. The functions are declared weak: a program built
 * with this header runs with or without the library, and checks first:
 *
 *	if (smc_preload_version)	// NULL when libsmcr.so is not loaded
 *		printf("smcr %s\n", smc_preload_version());
 *
 * dlsym(RTLD_DEFAULT, "smc_preload_fd_mode") works the same way without
 * the header.
 */
#ifndef SMC_PRELOAD_H
#define SMC_PRELOAD_H

#ifdef __cplusplus
extern "C" {
#endif

/* What libsmcr.so does with an fd (values are stable). */
enum smc_preload_fd_mode {
	SMC_PRELOAD_FD_UNTRACKED = 0,   /* not a TCP socket smcr looks after */
	SMC_PRELOAD_FD_PASSTHROUGH = 1, /* tracked, left alone */
	SMC_PRELOAD_FD_CANDIDATE = 2,   /* TCP stream socket that may move to SMC */
	SMC_PRELOAD_FD_SMC = 3,         /* data moves over SMC */
	SMC_PRELOAD_FD_FALLBACK = 4,    /* tried SMC, stays TCP */
};

#ifndef SMC_PRELOAD_WEAK
#define SMC_PRELOAD_WEAK __attribute__((weak))
#endif

/* The library's version string, e.g. "0.1.0". */
SMC_PRELOAD_WEAK const char *smc_preload_version(void);

/*
 * 1 when the library is loaded and acting on sockets; 0 when it is loaded
 * but passes everything through (setuid process, SMCR_DISABLE=1).
 */
SMC_PRELOAD_WEAK int smc_preload_active(void);

/* enum smc_preload_fd_mode for fd (SMC_PRELOAD_FD_UNTRACKED for any fd it ignores). */
SMC_PRELOAD_WEAK int smc_preload_fd_mode(int fd);

#ifdef __cplusplus
}
#endif

#endif /* SMC_PRELOAD_H */
