/* --container-remap-root's user namespace (docs/containers.md, "No new privilege"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper.h"

#define PFX "sunk-container: "

/* write_file writes s to path; 0 on success. */
static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/*
 * make_userns (helper.h): for --container-remap-root, a user namespace owned by the user in which the
 * user's uid and gid are 0 and nothing else is mapped; returns a descriptor of it, or -1. The
 * namespace must be made by a process whose euid is the user's (the owner is who may enter
 * it, and tasks enter it as the user, in task_init) and that is not chrooted (the kernel
 * refuses a user namespace to a chrooted process; slurmd may run chrooted): a child enters
 * the container's mount namespace first, whose root is its own, then drops to the user and
 * unshares. Root (here) writes the maps, with setgroups denied, so that "root" in the
 * container cannot shed a group that a file's permissions hold against the user.
 */
int make_userns(int ns_fd, uid_t uid, gid_t gid, const gid_t *gids, int ngids, char **error)
{
	int go[2], ready[2], fd = -1, status;
	char path[64], map[64], c;
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
		*error = strdup(PFX "--container-remap-root: pipe failed");
		return -1;
	}
	if ((pid = fork()) < 0) {
		*error = strdup(PFX "--container-remap-root: fork failed");
		return -1;
	}
	if (pid == 0) {
		/* Only system calls from here: slurmstepd has threads. */
		close(go[1]);
		close(ready[0]);
		if (setns(ns_fd, CLONE_NEWNS) < 0 || setgroups(ngids, gids) < 0 ||
		    setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0 ||
		    unshare(CLONE_NEWUSER) < 0) {
			c = (char)errno;
			(void)!write(ready[1], &c, 1);
			_exit(1);
		}
		/* Dumpable again after setresuid, so that root may write the maps. */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		c = 0;
		(void)!write(ready[1], &c, 1);
		(void)!read(go[0], &c, 1); /* end of file once the parent holds the namespace */
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	c = EIO; /* the child died before saying */
	if (read(ready[0], &c, 1) != 1 || c != 0) {
		if (asprintf(error, PFX "--container-remap-root: making the user namespace: %s",
			     strerror((unsigned char)c)) < 0)
			*error = NULL;
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	if (write_file(path, "deny") == 0) {
		snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		if (write_file(path, map) == 0) {
			snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
			snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
			if (write_file(path, map) == 0) {
				snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
				fd = open(path, O_RDONLY | O_CLOEXEC);
			}
		}
	}
	if (fd < 0 && asprintf(error, PFX "--container-remap-root: %s: %s", path, strerror(errno)) < 0)
		*error = NULL;
out:
	close(go[1]);
	close(ready[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return fd;
}
