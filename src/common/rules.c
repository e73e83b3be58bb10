/* SPDX-License-Identifier: MIT */
/* The rules file's parser (see rules.h). */
#include "common/rules.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/compiler.h"

/* A rules file is a few lines; anything bigger is not one. */
#define RULES_FILE_MAX (64u * 1024)

const char *smcr_rule_action_name(int action)
{
	switch (action) {
	case SMCR_RULE_SMC: return "smc";
	case SMCR_RULE_SHM: return "shm";
	case SMCR_RULE_RDMA: return "rdma";
	case SMCR_RULE_TCP: return "tcp";
	default: return "?";
	}
}

void smcr_rule_text(const struct smcr_rule *r, char *out, size_t len)
{
	char addr[INET6_ADDRSTRLEN];
	size_t n;

	if (!len)
		return;
	n = (size_t)snprintf(out, len, "%s", smcr_rule_action_name(r->action));
#define RULE_TEXT_ADD(...) \
	(n < len ? n += (size_t)snprintf(out + n, len - n, __VA_ARGS__) : n)
	if (r->program[0])
		RULE_TEXT_ADD(" program=%s", r->program);
	if (r->role)
		RULE_TEXT_ADD(" role=%s", r->role == SMCR_RULE_CLIENT ? "client" : "server");
	if (r->has_addr && inet_ntop(r->addr.family, r->addr.addr, addr, sizeof(addr)))
		RULE_TEXT_ADD(" addr=%s/%u", addr, r->addr.prefix);
	if (r->port)
		RULE_TEXT_ADD(" port=%u", r->port);
	if (!r->program[0] && !r->role && !r->has_addr && !r->port)
		RULE_TEXT_ADD(" *");
#undef RULE_TEXT_ADD
}

static int SMCR_PRINTF(4, 5) broken(struct smcr_rules *rules, const char *path, unsigned line,
				    const char *fmt, ...)
{
	static const char consequence[] = "; every connection stays TCP";
	char *out = rules->problem;
	size_t size = sizeof(rules->problem) - (sizeof(consequence) - 1), n;
	va_list ap;

	if (line)
		snprintf(out, size, "%.200s:%u: ", path, line);
	else
		snprintf(out, size, "%.200s: ", path);
	n = strlen(out);
	va_start(ap, fmt);
	vsnprintf(out + n, size - n, fmt, ap);
	va_end(ap);
	memcpy(out + strlen(out), consequence, sizeof(consequence));
	rules->broken = true;
	return -1;
}

static int parse_action(const char *word)
{
	static const char *const names[] = { "smc", "shm", "rdma", "tcp" };

	for (unsigned i = 0; i < ARRAY_SIZE(names); i++)
		if (strcmp(word, names[i]) == 0)
			return SMCR_RULE_SMC + (int)i;
	return 0;
}

/* One KEY=VALUE into r: NULL, or what was wrong. */
static const char *parse_match(struct smcr_rule *r, const char *key, const char *value,
			       unsigned *seen)
{
	static const char *const keys[] = { "program", "role", "addr", "port" };
	unsigned k;

	if (strcmp(key, "peer") == 0)
		key = "addr";
	for (k = 0; k < ARRAY_SIZE(keys) && strcmp(key, keys[k]) != 0; k++)
		;
	if (k == ARRAY_SIZE(keys))
		return "unknown key: expected program=, role=, addr= (or peer=) or port=";
	if (*seen & (1u << k))
		return "key given twice";
	*seen |= 1u << k;
	if (*value == '\0')
		return "empty value";
	switch (k) {
	case 0:
		if (strchr(value, '/') || strlen(value) >= sizeof(r->program))
			return "expected a program name (no '/', at most 63 characters)";
		memcpy(r->program, value, strlen(value) + 1);
		return NULL;
	case 1:
		if (strcmp(value, "client") == 0)
			r->role = SMCR_RULE_CLIENT;
		else if (strcmp(value, "server") == 0)
			r->role = SMCR_RULE_SERVER;
		else
			return "expected role=client or role=server";
		return NULL;
	case 2: {
		const char *why;

		if (smcr_config_parse_cidr_why(value, &r->addr, &why) < 0)
			return why;
		if (r->addr.port)
			return "a port belongs in port=, not in the address";
		r->has_addr = true;
		return NULL;
	}
	default: {
		unsigned port;

		if (smcr_config_parse_uint(value, &port) < 0 || port == 0 || port > 65535)
			return "expected a port 1..65535";
		r->port = (unsigned short)port;
		return NULL;
	}
	}
}

/* One line, comments and surrounding blanks removed, not empty. */
static int parse_line(struct smcr_rules *rules, const char *path, unsigned lineno, char *line)
{
	struct smcr_rule r = { .line = lineno, .file = (unsigned char)(rules->n_files - 1) };
	char *save = NULL, *word = strtok_r(line, " \t", &save);
	unsigned seen = 0, n_words = 0;
	bool star = false;

	r.action = (unsigned char)parse_action(word);
	if (!r.action)
		return broken(rules, path, lineno, "'%.40s': expected an action: smc, shm, rdma or tcp",
			      word);
	while ((word = strtok_r(NULL, " \t", &save)) != NULL) {
		char *eq = strchr(word, '=');
		const char *why;

		n_words++;
		if (strcmp(word, "*") == 0) {
			star = true;
			continue;
		}
		if (!eq)
			return broken(rules, path, lineno, "'%.40s': expected KEY=VALUE or *", word);
		*eq = '\0';
		why = parse_match(&r, word, eq + 1, &seen);
		if (why)
			return broken(rules, path, lineno, "'%.24s=%.48s': %s", word, eq + 1, why);
	}
	if (n_words == 0)
		return broken(rules, path, lineno, "'%s' matches nothing: expected * or KEY=VALUE",
			      smcr_rule_action_name(r.action));
	if (star && n_words > 1)
		return broken(rules, path, lineno, "* stands alone: expected * or KEY=VALUE...");
	if (rules->n >= SMCR_RULES_MAX)
		return broken(rules, path, lineno, "more than %u rules", SMCR_RULES_MAX);
	rules->rule[rules->n++] = r;
	return 0;
}

int smcr_rules_parse(struct smcr_rules *rules, const char *path, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	unsigned lineno = 0;

	if (rules->broken)
		return -1;
	if (rules->n_files >= ARRAY_SIZE(rules->files))
		return broken(rules, path, 0, "too many rules files");
	snprintf(rules->files[rules->n_files++], SMCR_RULES_PATH_LEN, "%s", path);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char line[SMCR_RULES_LINE_MAX], *hash, *first;

		lineno++;
		if (n >= sizeof(line))
			return broken(rules, path, lineno, "line longer than %u characters",
				      SMCR_RULES_LINE_MAX - 1);
		memcpy(line, p, n);
		line[n] = '\0';
		if (memchr(line, '\0', n))
			return broken(rules, path, lineno, "a NUL byte: not a text file");
		p += n + 1;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		first = line + strspn(line, " \t\r");
		/* a trailing CR (a file written on Windows) is a blank */
		for (char *c = first; *c; c++)
			if (*c == '\r')
				*c = ' ';
		if (*first == '\0')
			continue;
		if (parse_line(rules, path, lineno, first) < 0)
			return -1;
	}
	return 0;
}

static void fd_close(int fd)
{
	syscall(SYS_close, fd);
}

/*
 * Raw system calls: the library reads its rules inside the process it is
 * preloaded into, before the interposer's own table may exist, and none of
 * this must pass through its wrappers.
 */
/* /dev/null names an empty file: "no rules here". */
static bool is_dev_null(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

/*
 * Is there a file at path, as far as we may know?  A $HOME this process may
 * not enter (one inherited across a change of user) hides whether the user's
 * file exists: that is no file of this user's, not an unreadable one.
 */
static bool exists(const char *path)
{
	struct stat st;
	int saved = errno;
	bool there = stat(path, &st) == 0;

	errno = saved;
	return there;
}

static int load(struct smcr_rules *rules, const char *path, bool must_exist)
{
	char *text;
	struct stat st;
	size_t len = 0, size;
	int fd;

	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && !must_exist && (errno == ENOENT || errno == ENOTDIR || !exists(path)))
		return 0;
	if (fd < 0)
		return broken(rules, path, 0, "cannot be read: %s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		int err = errno;

		fd_close(fd);
		return broken(rules, path, 0, "cannot be read: %s", strerror(err));
	}
	if (is_dev_null(&st)) {
		fd_close(fd);
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		fd_close(fd);
		return broken(rules, path, 0, "not a regular file");
	}
	if (st.st_size > (off_t)RULES_FILE_MAX) {
		fd_close(fd);
		return broken(rules, path, 0, "larger than %u bytes", RULES_FILE_MAX);
	}
	/* Room for what fstat saw, and a byte more, so that the last read returns 0. */
	size = (size_t)st.st_size + 1;
	text = malloc(size);
	if (!text) {
		fd_close(fd);
		return broken(rules, path, 0, "no memory to read it");
	}
	for (;;) {
		ssize_t got = syscall(SYS_read, fd, text + len, size - len);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = errno;

			free(text);
			fd_close(fd);
			return broken(rules, path, 0, "cannot be read: %s", strerror(err));
		}
		if (got == 0 || (len += (size_t)got) == size)
			break;
	}
	fd_close(fd);
	int rc = smcr_rules_parse(rules, path, text, len);

	free(text);
	return rc;
}

int smcr_rules_load_file(struct smcr_rules *rules, const char *path)
{
	return load(rules, path, false);
}

static const char *nonempty(smcr_config_getenv_fn *get, void *ctx, const char *name)
{
	const char *value = get(name, ctx);

	return value && *value ? value : NULL;
}

/* The user's file: $XDG_CONFIG_HOME/smcr.conf, or ~/.config/smcr.conf; "" if neither. */
static void user_file(char *out, size_t size, smcr_config_getenv_fn *get, void *ctx)
{
	const char *xdg = nonempty(get, ctx, "XDG_CONFIG_HOME");
	const char *home = nonempty(get, ctx, "HOME");
	int n = -1;

	/* The XDG base directory rule: a relative path is invalid, ignored. */
	if (xdg && xdg[0] == '/')
		n = snprintf(out, size, "%s/%s", xdg, SMCR_RULES_USER_FILE);
	else if (home && home[0] == '/')
		n = snprintf(out, size, "%s/.config/%s", home, SMCR_RULES_USER_FILE);
	if (n < 0 || (size_t)n >= size)
		out[0] = '\0';
}

void smcr_rules_load(struct smcr_rules *rules, smcr_config_getenv_fn *get, void *ctx,
		     bool trusted)
{
	const char *system = trusted ? nonempty(get, ctx, "SMCR_CONF") : NULL;
	char user[SMCR_RULES_PATH_LEN];

	memset(rules, 0, sizeof(*rules));
	if (trusted) {
		user_file(user, sizeof(user), get, ctx);
		if (user[0] && smcr_rules_load_file(rules, user) < 0)
			return;
	}
	if (system && strlen(system) >= SMCR_RULES_PATH_LEN) {
		broken(rules, "SMCR_CONF", 0, "path longer than %u bytes", SMCR_RULES_PATH_LEN - 1);
		return;
	}
	/* A file named on purpose must be there: a typo must not drop the rules unseen. */
	if (system)
		(void)load(rules, system, true);
	else
		(void)smcr_rules_load_file(rules, SMCR_RULES_SYSTEM_FILE);
}
