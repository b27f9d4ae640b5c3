/* sunk_container's flags: Pyxis's names, registered in srun, sbatch, salloc and slurmstepd. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "helper.h"
#include "options.h"

#define PFX "sunk-container: "

/* The flags as given, kept as strings (O_* in helper.h): the helper parses them again, as
 * the authority. */
char *str_opt[O_NSTR];
const char *str_name[O_NSTR] = {
	"container-image", "container-mounts", "container-workdir", "container-name",
	"container-env", "container-save", "container-unshare",
};
/* Tri-state flags: -1 unset, 0 the --no- form (or --container-readonly), 1 the positive. */
int tri_opt[T_NTRI] = { -1, -1, -1, -1, -1 };
const char *tri_pos[T_NTRI] = {
	"container-mount-home", "container-remap-root", "container-entrypoint",
	"container-writable", "container-entrypoint-log",
};
const char *tri_neg[T_NTRI] = {
	"no-container-mount-home", "no-container-remap-root", "no-container-entrypoint",
	"container-readonly", NULL,
};

static int opt_str(int val, const char *optarg, int remote)
{
	const char *name = str_name[val];
	const char *err;

	if (optarg == NULL || *optarg == '\0') {
		slurm_error(PFX "--%s: argument required", name);
		return -1;
	}
	/* Slurm may call an option's callback twice with the same value (Pyxis notes it). */
	if (str_opt[val] != NULL) {
		if (strcmp(str_opt[val], optarg) == 0)
			return 0;
		if (val != O_MOUNTS && val != O_ENV) {
			slurm_error(PFX "--%s given twice (%s and %s)", name, str_opt[val], optarg);
			return -1;
		}
	}
	if ((err = check_str_option(val, optarg)) != NULL) {
		slurm_error(PFX "--%s: %s", name, err);
		return -1;
	}
	if (str_opt[val] != NULL && (val == O_MOUNTS || val == O_ENV)) {
		/* Repeated list flags add up, as in Pyxis. */
		char *joined;
		if (asprintf(&joined, "%s,%s", str_opt[val], optarg) < 0)
			return -1;
		free(str_opt[val]);
		str_opt[val] = joined;
		return 0;
	}
	str_opt[val] = strdup(optarg);
	return str_opt[val] ? 0 : -1;
}

/* val encodes the flag (val / 2) and its sense (val % 2). */
static int opt_tri(int val, const char *optarg, int remote)
{
	int t = val / 2, v = val % 2;

	if (tri_opt[t] != -1 && tri_opt[t] != v) {
		slurm_error(PFX "both --%s and --%s were given", tri_pos[t], tri_neg[t]);
		return -1;
	}
	tri_opt[t] = v;
	return 0;
}

#define TRI(i, flag, sense, help) { (char *)flag, NULL, (char *)help, 0, (i) * 2 + (sense), opt_tri }
/* Names as Pyxis has them; help texts say what sunk does. */
static struct spank_option options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]", "[sunk] run the step's tasks in this image "
	  "(enroot syntax; REGISTRY/IMAGE:TAG also works)", 1, O_IMAGE, opt_str },
	{ "container-mounts", "SRC:DST[:FLAGS][,...]", "[sunk] bind mounts into the container, FLAGS "
	  "joined by +: ro, rw", 1, O_MOUNTS, opt_str },
	{ "container-workdir", "PATH", "[sunk] working directory inside the container", 1, O_WORKDIR, opt_str },
	{ "container-name", "NAME[:FLAGS]", "[sunk] keep the container for later steps of the job under "
	  "this name (FLAGS: auto, create, exec, no_exec)", 1, O_NAME, opt_str },
	{ "container-env", "NAME[,NAME...]", "[sunk] variables whose job value wins over the image's",
	  1, O_ENV, opt_str },
	{ "container-save", "PATH", "[sunk] not supported yet", 1, O_SAVE, opt_str },
	{ "container-unshare", "NS[,NS...]", "[sunk] not supported yet", 1, O_UNSHARE, opt_str },
	TRI(T_HOME, "container-mount-home", 1, "[sunk] bind mount the user's home directory"),
	TRI(T_HOME, "no-container-mount-home", 0, "[sunk] do not bind mount the user's home directory"),
	TRI(T_REMAP, "container-remap-root", 1, "[sunk] appear as root inside the container (no new privileges)"),
	TRI(T_REMAP, "no-container-remap-root", 0, "[sunk] keep your own uid inside the container"),
	TRI(T_ENTRY, "container-entrypoint", 1, "[sunk] run the image's entrypoint"),
	TRI(T_ENTRY, "no-container-entrypoint", 0, "[sunk] do not run the image's entrypoint"),
	TRI(T_WRITABLE, "container-writable", 1, "[sunk] a private writable layer over the image"),
	TRI(T_WRITABLE, "container-readonly", 0, "[sunk] the image's filesystem read-only"),
	TRI(T_ENTRYLOG, "container-entrypoint-log", 1, "[sunk] accepted for Pyxis compatibility"),
	SPANK_OPTIONS_TABLE_END
};

int requested(void)
{
	return str_opt[O_IMAGE] != NULL || str_opt[O_NAME] != NULL;
}

int register_options(spank_t sp)
{
	/* spank_option_register, not a spank_options symbol: only it reaches sbatch/salloc. */
	for (struct spank_option *o = options; o->name != NULL; o++) {
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error(PFX "could not register --%s", o->name);
			return -1;
		}
	}
	return 0;
}
