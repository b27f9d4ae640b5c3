/*
 * sunk_container: Pyxis's --container-* flags for srun, sbatch and salloc (docs/containers.md).
 *
 * The plugin is small on purpose: it registers the flags, checks their form so that srun
 * refuses a malformed one before the job is queued, and on the compute node hands them to
 * the helper sunk-container (Go, internal/container), which pulls, unpacks and prepares the
 * container and answers with its holder's mount namespace and root and the image's
 * environment. Each task then enters that namespace and root before slurmstepd drops to the
 * user and execs the task, so the task stays
 * slurmstepd's child: same cgroup, CPU binding, environment, uid/gid and stdio as without
 * a container.
 *
 * Where each callback runs (slurm/spank.h, slurmstepd's mgr.c, Slurm 24.11):
 *   init            everywhere: registers the options
 *   init_post_opt   srun/sbatch/salloc (local, allocator) and slurmstepd (remote, root,
 *                   once per step and node, before any task is forked): the helper runs
 *                   here, as root, and leaves a holder process in the container's mount
 *                   namespace; slurmstepd opens the namespace and keeps the descriptor, which
 *                   the tasks inherit
 *   user_init       slurmstepd, as the user: reports the helper's error. A failing
 *                   init_post_opt makes slurmstepd answer slurmd "plugin name invalid" for
 *                   the whole launch; a failing user_init fails only the step (a batch
 *                   script with exit code 1), which leaves the node as it was.
 *   task_init_privileged  each task, root, after fork: setns() into the container's mount
 *                   namespace, chroot to the holder's root
 *   task_init       each task, as the user: the image's environment, the user namespace of
 *                   --container-remap-root, chdir to --container-workdir
 *   exit            slurmstepd: lets the holder go (a reaper then removes an unnamed container)
 *   job_epilog      the job's epilog, root: the helper removes the job's containers
 *
 * plugstack.conf must load it as "required": Slurm ignores the return codes of an optional
 * plugin, and a step asking for a container must not run without one.
 *   required /usr/local/lib/sunk/spank/sunk_container.so [helper=PATH] [arg=--state-dir=DIR ...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h> /* SLURM_BATCH_SCRIPT */
#include <slurm/spank.h>

#include "helper.h"
#include "options.h"

SPANK_PLUGIN(sunk_container, 1);

#define PFX "sunk-container: "

static char helper_path[PATH_MAX] = "/usr/local/bin/sunk-container";
/* plugstack.conf's arg=--x=y: the node's settings for the helper (--state-dir, --cache-dir,
 * --insecure-registry), written by sunk, never by a user. */
#define MAX_NODE_ARGS 16
static char *node_args[MAX_NODE_ARGS];
static int n_node_args;
static int ns_fd = -1;       /* the container's mount namespace, opened by slurmstepd */
static int root_fd = -1;     /* the container's root directory (the holder's root) */
static int userns_fd = -1;   /* --container-remap-root: the user's namespace, uid -> 0 */
static char *image_env;      /* the image's environment: NAME=VALUE entries ended by NULs */
static size_t image_env_len;
static int hold_fd = -1;     /* the write end of the holder's stdin: open while the step runs */
static char *deferred_error; /* the helper's one line, reported in user_init */

/* plugstack_args reads plugstack.conf's arguments; -1 for one it does not know. */
static int plugstack_args(int ac, char **av)
{
	n_node_args = 0;
	for (int i = 0; i < ac; i++) {
		if (strncmp(av[i], "helper=", 7) == 0) {
			snprintf(helper_path, sizeof(helper_path), "%s", av[i] + 7);
		} else if (strncmp(av[i], "arg=--", 6) == 0 && n_node_args < MAX_NODE_ARGS) {
			node_args[n_node_args++] = av[i] + 4;
		} else {
			slurm_error(PFX "unknown plugstack.conf argument %s", av[i]);
			return -1;
		}
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (plugstack_args(ac, av) < 0)
		return -1;
	return register_options(sp);
}

/* helper_argv: the helper's command line; the caller frees it with free_argv. */
static char **helper_argv(spank_t sp, const char *cmd)
{
	uid_t uid; gid_t gid; uint32_t job, step;
	gid_t *gids = NULL; int ngids = 0;
	struct argv_buf b = { 0 };

	if (spank_get_item(sp, S_JOB_UID, &uid) || spank_get_item(sp, S_JOB_GID, &gid) ||
	    spank_get_item(sp, S_JOB_ID, &job) || spank_get_item(sp, S_JOB_STEPID, &step)) {
		slurm_error(PFX "slurmstepd did not give the job's ids");
		return NULL;
	}
	spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids);
	argv_add(&b, "%s", helper_path);
	argv_add(&b, "%s", cmd);
	argv_add(&b, "--job-id=%u", job);
	argv_add(&b, "--step-id=%u", step);
	argv_add(&b, "--uid=%u", (unsigned)uid);
	argv_add(&b, "--gid=%u", (unsigned)gid);
	argv_add_gids(&b, gids, ngids);
	/* The batch step execs its script by its path in slurmd's spool directory: the
	 * container must show that file (Pyxis binds it too). */
	if (step == SLURM_BATCH_SCRIPT && strcmp(cmd, "prepare") == 0) {
		int argc = 0;
		char **args = NULL;
		if (spank_get_item(sp, S_JOB_ARGV, &argc, &args) != ESPANK_SUCCESS || argc < 1) {
			slurm_error(PFX "slurmstepd did not give the batch script's path");
			free_argv(b.v);
			return NULL;
		}
		argv_add(&b, "--batch-script=%s", args[0]);
	}
	/* The GPUs slurmstepd gave the step (its gres/gpu plugin set these in the step's
	 * environment before SPANK runs): the helper adds the node's driver files for them. */
	if (strcmp(cmd, "prepare") == 0) {
		static const char *const gpu_env[] = { "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES" };
		char val[1024];
		for (size_t i = 0; i < sizeof(gpu_env) / sizeof(gpu_env[0]); i++)
			if (spank_getenv(sp, gpu_env[i], val, sizeof(val)) == ESPANK_SUCCESS && val[0])
				argv_add(&b, "--gpu-env=%s=%s", gpu_env[i], val);
	}
	for (int i = 0; i < n_node_args; i++)
		argv_add(&b, "%s", node_args[i]);
	for (int i = 0; i < O_NSTR; i++)
		if (str_opt[i] != NULL)
			argv_add(&b, "--%s=%s", str_name[i], str_opt[i]);
	for (int i = 0; i < T_NTRI; i++)
		if (tri_opt[i] != -1)
			argv_add(&b, "--%s", tri_opt[i] ? tri_pos[i] : tri_neg[i]);
	return argv_done(&b);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char **argv;
	char *out = NULL, *err = NULL;
	char path[PATH_MAX];
	int hold[2];

	if (spank_context() != S_CTX_REMOTE || !requested())
		return 0;
	/* Errors are kept for user_init: see the top of this file. */
	if ((argv = helper_argv(sp, "prepare")) == NULL) {
		deferred_error = strdup(PFX "could not build the helper's command line");
		return 0;
	}
	/* The holder lives until this end of its stdin closes: at slurm_spank_exit, or when
	 * slurmstepd dies. Close-on-exec, so no task's program keeps it open. */
	if (pipe2(hold, O_CLOEXEC) < 0) {
		deferred_error = strdup(PFX "pipe failed");
		free_argv(argv);
		return 0;
	}
	if (run_helper(argv, hold[0], &out, &err) != 0) {
		deferred_error = err ? err : strdup(PFX "the helper failed without a message");
		err = NULL;
	} else if (parse_helper_output(out, "mntns", path, sizeof(path)) != 0) {
		deferred_error = strdup(PFX "the helper did not name the container's namespace");
	} else if ((ns_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		/* The holder waits for hold[1] to close, so it is there to be opened. */
		if (asprintf(&deferred_error, PFX "open %s: %s", path, strerror(errno)) < 0)
			deferred_error = NULL;
	} else if (parse_helper_output(out, "root", path, sizeof(path)) != 0) {
		deferred_error = strdup(PFX "the helper did not name the container's root");
	} else if ((root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		if (asprintf(&deferred_error, PFX "open %s: %s", path, strerror(errno)) < 0)
			deferred_error = NULL;
	} else if (parse_helper_output(out, "environ", path, sizeof(path)) != 0 ||
		   (image_env = read_environ(path, &image_env_len)) == NULL) {
		deferred_error = strdup(PFX "the helper did not give the image's environment");
	}
	close(hold[0]);
	if (root_fd >= 0) {
		hold_fd = hold[1];
	} else {
		close(hold[1]);
		if (ns_fd >= 0)
			close(ns_fd);
		ns_fd = -1;
	}
	if (deferred_error == NULL && ns_fd < 0)
		deferred_error = strdup(PFX "no container namespace");
	if (deferred_error == NULL && tri_opt[T_REMAP] == 1) {
		uid_t uid; gid_t gid;
		gid_t *gids = NULL; int ngids = 0;
		if (spank_get_item(sp, S_JOB_UID, &uid) || spank_get_item(sp, S_JOB_GID, &gid)) {
			deferred_error = strdup(PFX "--container-remap-root: slurmstepd did not give the job's ids");
		} else {
			spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids);
			userns_fd = make_userns(ns_fd, uid, gid, gids, ngids, &deferred_error);
			if (userns_fd < 0 && deferred_error == NULL)
				deferred_error = strdup(PFX "--container-remap-root failed");
		}
	}
	free(out);
	free(err);
	free_argv(argv);
	return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	if (deferred_error == NULL)
		return 0;
	slurm_error("%s", deferred_error);
	return -1;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	if (!spank_remote(sp) || ns_fd < 0)
		return 0;
	/* Root, in the task's own process: entering a mount namespace needs CAP_SYS_ADMIN.
	 * setns() puts the task at the namespace's root mount, which is the container's only
	 * when the helper ran at the root of its mount namespace (a pod), not when slurmd runs
	 * chrooted; so the task then chroots to the holder's root, the container's root in
	 * either case. slurmstepd's chdir to the job's cwd follows. */
	if (setns(ns_fd, CLONE_NEWNS) < 0) {
		slurm_error(PFX "entering the container: %s", strerror(errno));
		return -1;
	}
	if (fchdir(root_fd) < 0 || chroot(".") < 0) {
		slurm_error(PFX "entering the container's root: %s", strerror(errno));
		return -1;
	}
	close(ns_fd);
	close(root_fd);
	ns_fd = root_fd = -1;
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (!spank_remote(sp) || hold_fd < 0)
		return 0;
	/* The image's environment, as Pyxis gives it: the image's value wins, except for the
	 * names of --container-env that the job has. slurmstepd searches PATH for the command
	 * after this, so the image's PATH finds the image's programs. */
	for (size_t i = 0; i < image_env_len;) {
		const char *e = image_env + i, *eq = strchr(e, '=');
		char name[256], one[1];
		size_t n = eq ? (size_t)(eq - e) : 0;
		i += strlen(e) + 1;
		if (n == 0 || n >= sizeof(name))
			continue;
		memcpy(name, e, n);
		name[n] = '\0';
		if (str_opt[O_ENV] != NULL && name_in_list(name, n, str_opt[O_ENV]) &&
		    spank_getenv(sp, name, one, sizeof(one)) != ESPANK_ENV_NOEXIST)
			continue;
		if (spank_setenv(sp, name, eq + 1, 1) != ESPANK_SUCCESS) {
			slurm_error(PFX "setting %s from the image failed", name);
			return -1;
		}
	}
	/* As the user: the user owns the namespace, so may enter it; "root" inside has no
	 * power over anything outside it (nothing else is mapped, every mount is the node's). */
	if (userns_fd >= 0) {
		if (setns(userns_fd, CLONE_NEWUSER) < 0) {
			slurm_error(PFX "--container-remap-root: entering the user namespace: %s", strerror(errno));
			return -1;
		}
		close(userns_fd);
		userns_fd = -1;
	}
	/* As the user, after slurmstepd's chdir: the user's own permissions decide. */
	if (str_opt[O_WORKDIR] == NULL)
		return 0;
	if (chdir(str_opt[O_WORKDIR]) < 0) {
		slurm_error(PFX "--container-workdir: %s: %s", str_opt[O_WORKDIR], strerror(errno));
		return -1;
	}
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE || hold_fd < 0)
		return 0;
	/* The holder ends, and with it the lock that keeps a named container to this step. An
	 * unnamed container is then removed by the reaper the helper left (not by a helper run
	 * from here: slurmd signals slurmstepd's children as the job ends). A named one stays
	 * for the job's later steps; the epilog removes it (not yet: docs/containers.md). */
	if (ns_fd >= 0)
		close(ns_fd);
	if (root_fd >= 0)
		close(root_fd);
	if (userns_fd >= 0)
		close(userns_fd);
	close(hold_fd);
	ns_fd = root_fd = userns_fd = hold_fd = -1;
	free(image_env);
	image_env = NULL;
	image_env_len = 0;
	return 0;
}

/*
 * The job's epilog, on every node of the job, as root (slurmd runs it through slurmstepd;
 * slurm_spank_init is not called there): the helper removes every container the job left,
 * named ones included. It always returns 0: a required plugin's failing epilog drains the
 * node, and a container left behind is no reason to take a node away from other jobs.
 */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	uint32_t job;
	struct argv_buf b = { 0 };
	char **argv;
	char *out = NULL, *err = NULL;

	if (plugstack_args(ac, av) < 0 || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
		return 0;
	argv_add(&b, "%s", helper_path);
	argv_add(&b, "%s", "remove-job");
	argv_add(&b, "--job-id=%u", job);
	for (int i = 0; i < n_node_args; i++)
		argv_add(&b, "%s", node_args[i]);
	if ((argv = argv_done(&b)) == NULL)
		return 0;
	if (run_helper(argv, -1, &out, &err) != 0)
		slurm_error("%s", err ? err : PFX "removing the job's containers failed");
	free(out);
	free(err);
	free_argv(argv);
	return 0;
}
