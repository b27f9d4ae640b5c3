/*
 * The parts of sunk_container that do not need Slurm: the flags' form, the helper's command
 * line, running it. Kept apart so that test_helper.c checks them without slurmstepd.
 */
#ifndef SUNK_CONTAINER_HELPER_H
#define SUNK_CONTAINER_HELPER_H

#include <stddef.h>
#include <sys/types.h>

/* The flags that take a string, in the order of the plugin's str_name table. */
enum { O_IMAGE, O_MOUNTS, O_WORKDIR, O_NAME, O_ENV, O_SAVE, O_UNSHARE, O_NSTR };

/*
 * check_str_option: NULL when the value of string flag val has an acceptable form, else what
 * is wrong (a static string, without the flag's name). Only the form: whether an image exists
 * or a mount source is readable is for the node to find out, as the user.
 */
const char *check_str_option(int val, const char *arg);

/* A growing NULL-terminated argv. An allocation failure is remembered and argv_done says it. */
struct argv_buf {
	char **v;
	size_t n, cap;
	int failed;
};
void argv_add(struct argv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void argv_add_gids(struct argv_buf *b, const gid_t *gids, int n);
char **argv_done(struct argv_buf *b);
void free_argv(char **argv);

/*
 * run_helper: runs argv (argv[0] an absolute path) with an empty environment but PATH, waits,
 * and returns 0 when it exited 0. Its stdin is in_fd (-1: /dev/null). *out gets its stdout;
 * *err its last line of stderr, which is the one line the job's output shows (a helper killed
 * by a signal gets a line saying so). Processes the helper leaves behind must not keep its
 * stdout or stderr open: run_helper reads both to their end.
 */
int run_helper(char **argv, int in_fd, char **out, char **err);

/* parse_helper_output: copies the value of out's line "KEY=/absolute/path" into path. */
int parse_helper_output(const char *out, const char *key, char *path, size_t len);

/*
 * read_environ: the helper's environ file (NAME=VALUE entries each ended by a NUL), at most
 * 1 MiB; NULL if it cannot be read. *len is its length.
 */
char *read_environ(const char *path, size_t *len);

/* name_in_list: whether the name_len bytes of name are one of list's comma-separated names. */
int name_in_list(const char *name, size_t name_len, const char *list);

/*
 * make_userns: a user namespace owned by uid in which uid and gid are 0 and nothing else is
 * mapped, made from inside the mount namespace ns_fd; a descriptor of it, or -1 with *error
 * set (userns.c). Root only: slurmstepd calls it.
 */
int make_userns(int ns_fd, uid_t uid, gid_t gid, const gid_t *gids, int ngids, char **error);

#endif
