/* SPDX-License-Identifier: MIT */
/*
 * smcr-bpf: attach smcr's cgroup sock_ops program (RFC 7609 option mode) to a
 * cgroup v2, once, and keep it pinned under /sys/fs/bpf/smcr so that later
 * runs (and the library in every smcr process) find it.
 *
 *   smcr-bpf attach [CGROUP]   load or reuse the pinned program, attach it
 *   smcr-bpf detach [CGROUP]   detach it from CGROUP
 *   smcr-bpf status [CGROUP]   pinned? attached to / in effect for CGROUP?
 *   smcr-bpf unload            remove the pins (attachments stay until detached)
 *
 * CGROUP defaults to this process's own cgroup v2.  Exit status: 0 done (or
 * already so), 1 failed, 2 bad usage, 3 cannot here: no privilege, no BPF, no
 * cgroup v2, no bpffs (smc_run then goes on without the option mode).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "smcr/bpf_abi.h"

#ifndef SMCR_BPF_OBJ_DIR
#define SMCR_BPF_OBJ_DIR "/usr/local/lib/smcr"
#endif
#define OBJ_FULL "smcr_sockops.bpf.o"
#define OBJ_CLIENT "smcr_sockops_client.bpf.o"
/*
 * The pin of a global port map that earlier versions of the program kept,
 * writable through marks of any user's sockets: its presence means such a
 * program is still pinned (and maybe attached), which attach will not reuse.
 */
#define LEGACY_PORTS_MAP_PATH SMCR_BPF_PIN_DIR "/smcr_ports"
#define BPF_FS_MAGIC_ 0xcafe4a11
#define CGROUP2_SUPER_MAGIC_ 0x63677270

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_CANNOT = 3 };

static bool quiet;
/* libbpf's warnings are not shown while a load that may fail is tried. */
static bool libbpf_muted;

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void complain(const char *fmt, ...)
{
	va_list ap;

	fputs("smcr-bpf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* errno values that mean "not possible here", not "broken". */
static int exit_for(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
	case ENOSYS:
	case EOPNOTSUPP:
	case EINVAL: /* e.g. no sock_ops or header-option support in this kernel */
	case ENOENT:
	case EROFS:
		return EXIT_CANNOT;
	default:
		return EXIT_FAIL;
	}
}

/* libbpf's own messages: its warnings unless -q. Its format strings are its own. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_WARN && !quiet && !libbpf_muted)
		return vfprintf(stderr, fmt, ap);
	return 0;
}
#pragma GCC diagnostic pop

/* ---- where things are ----------------------------------------------------------- */

/*
 * The object NAME: beside $SMCR_BPF_OBJ (which names the full one), beside a
 * build tree's tool, or the installed one.
 */
static const char *object_path(const char *name, char *buf, size_t size)
{
	const char *env = getenv("SMCR_BPF_OBJ");
	char *slash;
	ssize_t n;

	if (env && *env) {
		if (strcmp(name, OBJ_FULL) == 0)
			return env;
		snprintf(buf, size, "%s", env);
		slash = strrchr(buf, '/');
		snprintf(slash ? slash + 1 : buf, size - (size_t)(slash ? slash + 1 - buf : 0),
			 "%s", name);
		return buf;
	}
	n = readlink("/proc/self/exe", buf, size - 64);
	if (n > 0) {
		buf[n] = '\0';
		slash = strrchr(buf, '/');
		if (slash) {
			snprintf(slash, size - (size_t)(slash - buf), "/../bpf/%s", name);
			if (access(buf, R_OK) == 0)
				return buf;
		}
	}
	snprintf(buf, size, "%s/%s", SMCR_BPF_OBJ_DIR, name);
	return buf;
}

/* This process's cgroup v2 directory, from mountinfo and /proc/self/cgroup. */
static int own_cgroup(char *out, size_t size)
{
	char line[4096], mnt[PATH_MAX] = "", rel[PATH_MAX] = "";
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		char point[PATH_MAX];

		if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1) {
			snprintf(mnt, sizeof(mnt), "%s", point);
			break;
		}
	}
	fclose(f);
	if (!mnt[0])
		return -ENOENT;
	f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(rel, sizeof(rel), "%s", line + 3);
			break;
		}
	}
	fclose(f);
	if (snprintf(out, size, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) >= (int)size)
		return -ENAMETOOLONG;
	return 0;
}

static int open_cgroup(const char *path, char *resolved, size_t size)
{
	struct statfs sfs;
	int fd, rc;

	if (path) {
		snprintf(resolved, size, "%s", path);
	} else {
		rc = own_cgroup(resolved, size);
		if (rc < 0) {
			complain("no cgroup v2 mounted: %s", strerror(-rc));
			return rc;
		}
	}
	fd = open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		complain("%s: %s", resolved, strerror(errno));
		return rc;
	}
	if (fstatfs(fd, &sfs) == 0 && sfs.f_type != CGROUP2_SUPER_MAGIC_) {
		complain("%s is not a cgroup v2 directory", resolved);
		close(fd);
		return -ENOTDIR;
	}
	return fd;
}

/* bpffs on /sys/fs/bpf (mounted if it is not), and our directory in it, locked. */
static int open_pin_dir(bool create)
{
	struct statfs sfs;
	int fd;

	if (statfs("/sys/fs/bpf", &sfs) < 0)
		return -errno;
	if (sfs.f_type != BPF_FS_MAGIC_) {
		if (!create)
			return -ENOENT;
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0755") < 0) {
			complain("cannot mount bpffs on /sys/fs/bpf: %s", strerror(errno));
			return -errno;
		}
	}
	if (create && mkdir(SMCR_BPF_PIN_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = open(SMCR_BPF_PIN_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

static int prog_id(int prog_fd, __u32 *id)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) < 0)
		return -errno;
	*id = info.id;
	return 0;
}

/* 1 if prog is among cgroup's (effective or directly attached) sock_ops programs. */
static int cgroup_has(int cg_fd, __u32 id, bool effective)
{
	__u32 ids[64], cnt = 64, attach_flags = 0, i;

	if (bpf_prog_query(cg_fd, BPF_CGROUP_SOCK_OPS, effective ? BPF_F_QUERY_EFFECTIVE : 0,
			   &attach_flags, ids, &cnt) < 0)
		return -errno;
	for (i = 0; i < cnt; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

/*
 * Load the object at PATH and pin its program (its maps are pinned by name):
 * the program's fd.  A load that may fail (`trial`) fails silently.
 */
static int load_object(const char *path, bool trial)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = SMCR_BPF_PIN_DIR);
	struct bpf_object *obj;
	struct bpf_program *prog;
	int fd, rc;

	obj = bpf_object__open_file(path, &opts);
	if (!obj) {
		rc = -errno;
		complain("%s: %s", path, strerror(errno));
		return rc;
	}
	libbpf_muted = trial;
	rc = bpf_object__load(obj);
	libbpf_muted = false;
	if (rc) {
		if (!trial)
			complain("cannot load %s: %s", path, strerror(-rc));
		bpf_object__close(obj);
		return rc;
	}
	prog = bpf_object__next_program(obj, NULL);
	rc = prog ? bpf_program__pin(prog, SMCR_BPF_PROG_PATH) : -ENOENT;
	if (rc) {
		complain("cannot pin %s: %s", SMCR_BPF_PROG_PATH, strerror(-rc));
		bpf_object__close(obj);
		return rc;
	}
	/*
	 * Every smcr process marks its own sockets and reads their records: the
	 * key is an fd of the caller, so a user reaches only sockets it holds,
	 * and no record says anything about another socket.
	 */
	chmod(SMCR_BPF_SK_MAP_PATH, 0666);
	chmod(SMCR_BPF_PIN_DIR, 0755);
	fd = dup(bpf_program__fd(prog));
	bpf_object__close(obj);
	say("loaded %s, pinned under %s\n", path, SMCR_BPF_PIN_DIR);
	return fd < 0 ? -errno : fd;
}

/*
 * The pinned program, or load and pin one: the full program, else (a kernel
 * that refuses it: no BTF, or a lockdown that forbids it to read a
 * listener's mark) the one that announces SMC in SYNs only.
 */
static int load_or_reuse(void)
{
	char full[PATH_MAX], client[PATH_MAX];
	int fd;

	if (access(LEGACY_PORTS_MAP_PATH, F_OK) == 0) {
		complain("an earlier smcr program is pinned (%s): run 'smcr-bpf detach' for "
			 "each cgroup it is attached to and 'smcr-bpf unload' first",
			 LEGACY_PORTS_MAP_PATH);
		return -EEXIST;
	}
	fd = bpf_obj_get(SMCR_BPF_PROG_PATH);
	if (fd >= 0)
		return fd;
	fd = load_object(object_path(OBJ_FULL, full, sizeof(full)), true);
	if (fd >= 0 || (fd == -EPERM && geteuid() != 0)) /* no privilege: no use trying */
		return fd;
	say("this kernel refuses %s (%s): SMC is announced in SYNs only, never in a "
	    "listener's SYN-ACK\n",
	    full, strerror(-fd));
	return load_object(object_path(OBJ_CLIENT, client, sizeof(client)), false);
}

/* Which program is pinned: "SYN and SYN-ACK" or "SYNs only". */
static const char *prog_kind(int prog_fd)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) < 0)
		return "unknown";
	if (strcmp(info.name, SMCR_BPF_PROG_NAME) == 0)
		return "SYN and SYN-ACK";
	if (strcmp(info.name, SMCR_BPF_PROG_NAME_CLIENT) == 0)
		return "SYNs only";
	return "unknown";
}

/* ---- commands ------------------------------------------------------------------- */

static int cmd_attach(const char *cgroup)
{
	char cg[PATH_MAX];
	int dir_fd, prog_fd, cg_fd, rc;
	__u32 id;

	dir_fd = open_pin_dir(true);
	if (dir_fd < 0) {
		complain("%s: %s", SMCR_BPF_PIN_DIR, strerror(-dir_fd));
		return exit_for(-dir_fd);
	}
	prog_fd = load_or_reuse();
	if (prog_fd < 0) {
		close(dir_fd);
		return exit_for(-prog_fd);
	}
	cg_fd = open_cgroup(cgroup, cg, sizeof(cg));
	if (cg_fd < 0) {
		close(prog_fd);
		close(dir_fd);
		return exit_for(-cg_fd);
	}
	rc = prog_id(prog_fd, &id);
	if (rc == 0 && cgroup_has(cg_fd, id, true) == 1) {
		say("already in effect for %s (program %u)\n", cg, id);
		rc = 0;
	} else if (bpf_prog_attach(prog_fd, cg_fd, BPF_CGROUP_SOCK_OPS, BPF_F_ALLOW_MULTI) < 0) {
		rc = -errno;
		if (rc == -EEXIST) {
			say("already attached to %s (program %u)\n", cg, id);
			rc = 0;
		} else {
			complain("cannot attach to %s: %s", cg, strerror(-rc));
		}
	} else {
		say("attached to %s (program %u)\n", cg, id);
		rc = 0;
	}
	close(cg_fd);
	close(prog_fd);
	close(dir_fd);
	return rc ? exit_for(-rc) : EXIT_OK;
}

static int cmd_detach(const char *cgroup)
{
	char cg[PATH_MAX];
	int prog_fd, cg_fd, rc = 0;

	prog_fd = bpf_obj_get(SMCR_BPF_PROG_PATH);
	if (prog_fd < 0) {
		say("not pinned (%s): nothing to detach\n", SMCR_BPF_PROG_PATH);
		return EXIT_OK;
	}
	cg_fd = open_cgroup(cgroup, cg, sizeof(cg));
	if (cg_fd < 0) {
		close(prog_fd);
		return exit_for(-cg_fd);
	}
	if (bpf_prog_detach2(prog_fd, cg_fd, BPF_CGROUP_SOCK_OPS) < 0) {
		rc = -errno;
		if (rc == -ENOENT) {
			say("not attached to %s\n", cg);
			rc = 0;
		} else {
			complain("cannot detach from %s: %s", cg, strerror(-rc));
		}
	} else {
		say("detached from %s\n", cg);
	}
	close(cg_fd);
	close(prog_fd);
	return rc ? exit_for(-rc) : EXIT_OK;
}

static int cmd_status(const char *cgroup)
{
	char cg[PATH_MAX];
	int prog_fd, cg_fd, direct, effective;
	__u32 id = 0;

	prog_fd = bpf_obj_get(SMCR_BPF_PROG_PATH);
	if (prog_fd < 0) {
		say("pinned: no (%s: %s)\n", SMCR_BPF_PROG_PATH, strerror(errno));
		return EXIT_FAIL;
	}
	prog_id(prog_fd, &id);
	say("pinned: %s (program %u, announces SMC in %s)\n", SMCR_BPF_PROG_PATH, id,
	    prog_kind(prog_fd));
	cg_fd = open_cgroup(cgroup, cg, sizeof(cg));
	if (cg_fd < 0) {
		close(prog_fd);
		return EXIT_FAIL;
	}
	direct = cgroup_has(cg_fd, id, false);
	effective = cgroup_has(cg_fd, id, true);
	say("cgroup %s: attached %s, in effect %s\n", cg, direct == 1 ? "yes" : "no",
	    effective == 1 ? "yes" : "no");
	close(cg_fd);
	close(prog_fd);
	return effective == 1 ? EXIT_OK : EXIT_FAIL;
}

static int cmd_unload(void)
{
	static const char *const pins[] = { SMCR_BPF_PROG_PATH, SMCR_BPF_SK_MAP_PATH,
					    LEGACY_PORTS_MAP_PATH };
	int dir_fd = open_pin_dir(false), rc = EXIT_OK;
	size_t i;

	if (dir_fd < 0) {
		say("nothing pinned\n");
		return EXIT_OK;
	}
	for (i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		if (unlink(pins[i]) < 0 && errno != ENOENT) {
			complain("%s: %s", pins[i], strerror(errno));
			rc = exit_for(errno);
		}
	}
	close(dir_fd);
	if (rmdir(SMCR_BPF_PIN_DIR) < 0 && errno != ENOENT)
		complain("%s: %s", SMCR_BPF_PIN_DIR, strerror(errno));
	say("unpinned; cgroups it is attached to keep it until 'smcr-bpf detach'\n");
	return rc;
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: smcr-bpf [-q] attach [CGROUP]   attach the RFC 7609 option program\n"
		"       smcr-bpf [-q] detach [CGROUP]   detach it\n"
		"       smcr-bpf [-q] status [CGROUP]   is it pinned, in effect for CGROUP?\n"
		"       smcr-bpf [-q] unload            remove its pins under %s\n"
		"CGROUP: a cgroup v2 directory; default: this process's own.\n"
		"Exit status: 0 done, 1 failed, 2 usage, 3 not possible here (privilege,\n"
		"BPF, cgroup v2 or bpffs missing).\n",
		SMCR_BPF_PIN_DIR);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd, *cgroup;
	int c;

	while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc || argc - optind > 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[optind];
	cgroup = argc - optind == 2 ? argv[optind + 1] : NULL;
	libbpf_set_print(libbpf_quiet);
	if (strcmp(cmd, "attach") == 0)
		return cmd_attach(cgroup);
	if (strcmp(cmd, "detach") == 0)
		return cmd_detach(cgroup);
	if (strcmp(cmd, "status") == 0)
		return cmd_status(cgroup);
	if (strcmp(cmd, "unload") == 0 && !cgroup)
		return cmd_unload();
	usage(stderr);
	return EXIT_USAGE;
}
