#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper.h"

static int is_name_char(char c, int first)
{
	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
		return 1;
	return !first && (c == '.' || c == '-');
}

static int has_space_or_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return 1;
	return 0;
}

/* One SRC[:DST[:FLAGS]] entry of --container-mounts, [s, end). */
static const char *check_mount(const char *s, const char *end)
{
	const char *part[3] = { s, NULL, NULL }, *pend[3] = { end, end, end };
	int n = 1;

	for (const char *p = s; p < end; p++) {
		if (*p != ':')
			continue;
		if (n == 3)
			return "expected SRC[:DST[:FLAGS]]";
		pend[n - 1] = p;
		part[n++] = p + 1;
	}
	if (pend[0] == part[0])
		return "expected SRC[:DST[:FLAGS]]";
	for (int i = 0; i < 2 && i < n; i++)
		if (*part[i] != '/' || pend[i] == part[i])
			return "mount source and target must be absolute paths";
	if (n == 3 && part[2] < pend[2]) {
		static const char *ok[] = { "ro", "rw", "bind", "rbind", "private", "rprivate",
					    "slave", "rslave", "nosuid", "nodev", NULL };
		const char *f = part[2];
		while (f <= pend[2]) {
			const char *fe = memchr(f, '+', pend[2] - f);
			size_t len;
			int found = 0;
			if (fe == NULL)
				fe = pend[2];
			len = fe - f;
			for (int i = 0; ok[i]; i++)
				if (strlen(ok[i]) == len && strncmp(ok[i], f, len) == 0)
					found = 1;
			if (!found)
				return "mount flags are ro or rw (rbind, rprivate, nosuid and nodev are accepted)";
			f = fe + 1;
		}
	}
	return NULL;
}

const char *check_str_option(int val, const char *arg)
{
	if (arg == NULL || *arg == '\0')
		return "argument required";
	if (has_space_or_control(arg))
		return "no spaces or control characters";
	switch (val) {
	case O_IMAGE:
		if (strstr(arg, "://") != NULL && strncmp(arg, "docker://", 9) != 0)
			return "only docker:// images (or [USER@][REGISTRY#]IMAGE[:TAG]) are supported";
		return NULL;
	case O_MOUNTS:
		for (const char *s = arg;;) {
			const char *e = strchr(s, ',');
			const char *err = check_mount(s, e ? e : s + strlen(s));
			if (err)
				return err;
			if (e == NULL)
				return NULL;
			s = e + 1;
		}
	case O_WORKDIR:
		return arg[0] == '/' ? NULL : "must be an absolute path";
	case O_NAME: {
		const char *colon = strchr(arg, ':');
		size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
		if (len == 0 || len > 64)
			return "a name is 1-64 characters";
		for (size_t i = 0; i < len; i++)
			if (!is_name_char(arg[i], i == 0))
				return "a name is letters, digits, _ . - and does not start with . or -";
		if (colon && strcmp(colon + 1, "auto") && strcmp(colon + 1, "create") &&
		    strcmp(colon + 1, "exec") && strcmp(colon + 1, "no_exec"))
			return "the flag after : is auto, create, exec or no_exec";
		return NULL;
	}
	case O_ENV:
		/* NAME[,NAME...], each NAME [A-Za-z_][A-Za-z0-9_]*. */
		for (const char *s = arg;; s++) {
			int first = (s == arg || s[-1] == ',');
			if (*s == '\0' || *s == ',') {
				if (first)
					return "a comma-separated list of variable names";
				if (*s == '\0')
					return NULL;
			} else if (!is_name_char(*s, 1) || (first && *s >= '0' && *s <= '9')) {
				return "a comma-separated list of variable names";
			}
		}
	case O_SAVE:
		return "saving a container is not supported yet";
	case O_UNSHARE:
		return "private namespaces are not supported yet";
	}
	return "unknown option";
}

void argv_add(struct argv_buf *b, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (b->failed)
		return;
	if (b->n + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		char **v = realloc(b->v, cap * sizeof(*v));
		if (v == NULL) {
			b->failed = 1;
			return;
		}
		b->v = v;
		b->cap = cap;
	}
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		b->failed = 1;
	else
		b->v[b->n++] = s;
	va_end(ap);
	b->v[b->n] = NULL;
}

void argv_add_gids(struct argv_buf *b, const gid_t *gids, int n)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f;

	if (n <= 0 || gids == NULL)
		return;
	if ((f = open_memstream(&s, &len)) == NULL) {
		b->failed = 1;
		return;
	}
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%u", i ? "," : "", (unsigned)gids[i]);
	fclose(f);
	argv_add(b, "--gids=%s", s);
	free(s);
}

char **argv_done(struct argv_buf *b)
{
	if (b->failed || b->v == NULL) {
		free_argv(b->v);
		return NULL;
	}
	return b->v;
}

void free_argv(char **argv)
{
	if (argv == NULL)
		return;
	for (char **p = argv; *p; p++)
		free(*p);
	free(argv);
}

/* append reads what fd has into *buf; 0 at end of file. */
static int append(int fd, char **buf, size_t *len)
{
	char chunk[4096];
	ssize_t r = read(fd, chunk, sizeof(chunk));
	char *nb;

	if (r <= 0)
		return (r < 0 && errno == EINTR) ? 1 : 0;
	if ((nb = realloc(*buf, *len + r + 1)) == NULL)
		return 0;
	memcpy(nb + *len, chunk, r);
	*len += r;
	nb[*len] = '\0';
	*buf = nb;
	return 1;
}

/* last_line: a copy of the last non-empty line of s. */
static char *last_line(const char *s)
{
	const char *end, *start;

	if (s == NULL)
		return NULL;
	end = s + strlen(s);
	while (end > s && end[-1] == '\n')
		end--;
	if (end == s)
		return NULL;
	start = end;
	while (start > s && start[-1] != '\n')
		start--;
	return strndup(start, end - start);
}

int run_helper(char **argv, int in_fd, char **out, char **err)
{
	int po[2], pe[2], status;
	char *obuf = NULL, *ebuf = NULL;
	size_t olen = 0, elen = 0;
	pid_t pid;

	*out = *err = NULL;
	if (pipe2(po, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(pe, O_CLOEXEC) < 0) {
		close(po[0]); close(po[1]);
		return -1;
	}
	if ((pid = fork()) < 0) {
		close(po[0]); close(po[1]); close(pe[0]); close(pe[1]);
		return -1;
	}
	if (pid == 0) {
		/* The job's environment must not steer a program that runs as root. */
		char *env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
		int in = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
		if (in >= 0 && in != 0)
			dup2(in, 0); /* dup2 clears close-on-exec on the copy */
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execve(argv[0], argv, env);
		dprintf(2, "sunk-container: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	for (int open_fds = 2; open_fds > 0;) {
		struct pollfd p[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (!append(p[i].fd, i ? &ebuf : &obuf, i ? &elen : &olen)) {
				close(i ? pe[0] : po[0]);
				if (i) pe[0] = -1; else po[0] = -1;
				open_fds--;
			}
		}
	}
	if (po[0] >= 0) close(po[0]);
	if (pe[0] >= 0) close(pe[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*out = obuf;
	*err = last_line(ebuf);
	free(ebuf);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (*err == NULL && WIFSIGNALED(status) &&
	    asprintf(err, "sunk-container: killed by signal %d", WTERMSIG(status)) < 0)
		*err = NULL;
	return -1;
}

int parse_helper_output(const char *out, const char *key, char *path, size_t len)
{
	size_t k = strlen(key);

	for (const char *s = out; s && *s;) {
		const char *e = strchrnul(s, '\n');
		if (strncmp(s, key, k) == 0 && s[k] == '=' && s[k + 1] == '/' &&
		    (size_t)(e - s - k - 1) < len) {
			memcpy(path, s + k + 1, e - s - k - 1);
			path[e - s - k - 1] = '\0';
			return 0;
		}
		s = *e ? e + 1 : e;
	}
	return -1;
}

char *read_environ(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t n = 0;

	*len = 0;
	if (fd < 0)
		return NULL;
	while (append(fd, &buf, &n) && n <= (1 << 20))
		;
	close(fd);
	if (n > (1 << 20)) {
		free(buf);
		return NULL;
	}
	if (buf == NULL)
		buf = calloc(1, 1);
	*len = n;
	return buf;
}

int name_in_list(const char *name, size_t name_len, const char *list)
{
	for (const char *s = list; s && *s;) {
		const char *e = strchrnul(s, ',');
		if ((size_t)(e - s) == name_len && strncmp(s, name, name_len) == 0)
			return 1;
		s = *e ? e + 1 : e;
	}
	return 0;
}
