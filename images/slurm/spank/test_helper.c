/* test_helper: the plugin's Slurm-free parts (helper.c), run by `make check`. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"

static int failures;

static void expect(int val, const char *arg, const char *want_err)
{
	const char *got = check_str_option(val, arg);
	int ok = want_err == NULL ? got == NULL : got != NULL && strstr(got, want_err) != NULL;
	if (!ok) {
		fprintf(stderr, "FAIL check_str_option(%d, \"%s\") = %s, want %s\n", val, arg,
			got ? got : "NULL", want_err ? want_err : "NULL");
		failures++;
	}
}

int main(void)
{
	char path[64], *out, *err;
	int n = 0;

	expect(O_IMAGE, "nvcr.io#nvidia/pytorch:24.01-py3", NULL);
	expect(O_IMAGE, "docker://localhost:5000/test/alpine:1", NULL);
	expect(O_IMAGE, "", "argument required");
	expect(O_IMAGE, "a b", "no spaces");
	expect(O_IMAGE, "dockerd://img", "only docker://");
	expect(O_MOUNTS, "/shared", NULL);
	expect(O_MOUNTS, "/shared:/data:ro+rprivate,/scratch:/scratch", NULL);
	expect(O_MOUNTS, "/a:/b:", NULL);
	expect(O_MOUNTS, "data:/data", "absolute");
	expect(O_MOUNTS, "/a:data", "absolute");
	expect(O_MOUNTS, ":/data", "expected SRC");
	expect(O_MOUNTS, "/a,,/b", "expected SRC");
	expect(O_MOUNTS, "/a:/b:ro:x", "expected SRC");
	expect(O_MOUNTS, "/a:/b:suid", "mount flags");
	expect(O_MOUNTS, "/a:/b:ro+", "mount flags");
	expect(O_WORKDIR, "/data", NULL);
	expect(O_WORKDIR, "data", "absolute");
	expect(O_NAME, "train", NULL);
	expect(O_NAME, "train:no_exec", NULL);
	expect(O_NAME, "../x", "does not start with");
	expect(O_NAME, "a/b", "letters, digits");
	expect(O_NAME, ":auto", "1-64");
	expect(O_NAME, "x:sometimes", "auto, create");
	expect(O_ENV, "PATH,LD_LIBRARY_PATH", NULL);
	expect(O_ENV, "PATH,,X", "variable names");
	expect(O_ENV, "PATH,", "variable names");
	expect(O_ENV, "1X", "variable names");
	expect(O_ENV, "A-B", "variable names");
	expect(O_SAVE, "/x.sqsh", "not supported yet");
	expect(O_UNSHARE, "net", "not supported yet");

	/* The helper's stdout, stderr's last line and exit status. */
	char *ok[] = { "/bin/sh", "-c", "echo x=1; echo mntns=/run/c/ns; echo noise >&2", NULL };
	if (run_helper(ok, -1, &out, &err) != 0 || parse_helper_output(out, "mntns", path, sizeof(path)) != 0 ||
	    strcmp(path, "/run/c/ns") != 0 || strcmp(err, "noise") != 0) {
		fprintf(stderr, "FAIL run_helper ok: out=%s err=%s\n", out, err);
		failures++;
	}
	free(out); free(err);
	char *bad[] = { "/bin/sh", "-c", "echo progress >&2; echo 'sunk-container: --container-image: no such image' >&2; exit 1", NULL };
	if (run_helper(bad, -1, &out, &err) == 0 || err == NULL ||
	    strcmp(err, "sunk-container: --container-image: no such image") != 0) {
		fprintf(stderr, "FAIL run_helper bad: err=%s\n", err);
		failures++;
	}
	free(out); free(err);
	/* The job's environment does not reach the helper. */
	setenv("SUNK_SECRET_TEST", "leak", 1);
	char *env[] = { "/bin/sh", "-c", "echo \"mntns=/$SUNK_SECRET_TEST\"", NULL };
	if (run_helper(env, -1, &out, &err) != 0 || parse_helper_output(out, "mntns", path, sizeof(path)) != 0 ||
	    strcmp(path, "/") != 0) {
		fprintf(stderr, "FAIL run_helper env: out=%s\n", out);
		failures++;
	}
	free(out); free(err);
	/* The helper's stdin is the descriptor given: prepare's holder waits on it. */
	int hold[2];
	if (pipe(hold) < 0 || write(hold[1], "x", 1) != 1) {
		fprintf(stderr, "FAIL pipe\n");
		return 1;
	}
	close(hold[1]);
	char *in[] = { "/bin/sh", "-c", "read v; echo \"mntns=/$v\"", NULL };
	if (run_helper(in, hold[0], &out, &err) != 0 || parse_helper_output(out, "mntns", path, sizeof(path)) != 0 ||
	    strcmp(path, "/x") != 0) {
		fprintf(stderr, "FAIL run_helper stdin: out=%s\n", out);
		failures++;
	}
	close(hold[0]);
	free(out); free(err);
	char *missing[] = { "/nonexistent/sunk-container", NULL };
	if (run_helper(missing, -1, &out, &err) == 0 || err == NULL || strstr(err, "cannot run") == NULL) {
		fprintf(stderr, "FAIL run_helper missing: err=%s\n", err);
		failures++;
	}
	free(out); free(err);
	if (parse_helper_output("mntns=/a/very/long/path/that/does/not/fit/into/the/buffer/given/x/y/z", "mntns", path, 16) == 0 ||
	    parse_helper_output("mntns=relative", "mntns", path, sizeof(path)) == 0) {
		fprintf(stderr, "FAIL parse_helper_output accepted a bad line\n");
		failures++;
	}
	if (parse_helper_output("mntns=/proc/7/ns/mnt\nroot=/proc/7/root\n", "root", path, sizeof(path)) != 0 ||
	    strcmp(path, "/proc/7/root") != 0 ||
	    parse_helper_output("rootfs=/x\n", "root", path, sizeof(path)) == 0) {
		fprintf(stderr, "FAIL parse_helper_output by key\n");
		failures++;
	}

	/* The image's environment file and --container-env's names. */
	char envf[] = "/tmp/sunk-environ-XXXXXX";
	int efd = mkstemp(envf);
	size_t elen = 0;
	char *ebuf = NULL;
	if (efd < 0 || write(efd, "PATH=/opt/bin\0A=x\ny\0", 21) != 21 ||
	    (ebuf = read_environ(envf, &elen)) == NULL || elen != 21 || strcmp(ebuf + 14, "A=x\ny") != 0) {
		fprintf(stderr, "FAIL read_environ: len %zu\n", elen);
		failures++;
	}
	if (efd >= 0) { close(efd); unlink(envf); }
	free(ebuf);
	if (read_environ("/nonexistent/environ", &elen) != NULL) {
		fprintf(stderr, "FAIL read_environ of a missing file\n");
		failures++;
	}
	if (!name_in_list("PATH=x", 4, "HOME,PATH") || name_in_list("PAT", 3, "HOME,PATH") ||
	    name_in_list("PATH", 4, "") || !name_in_list("A", 1, "A")) {
		fprintf(stderr, "FAIL name_in_list\n");
		failures++;
	}

	struct argv_buf b = { 0 };
	gid_t gids[] = { 5, 27 };
	argv_add(&b, "%s", "/h");
	argv_add_gids(&b, gids, 2);
	char **v = argv_done(&b);
	while (v && v[n]) n++;
	if (n != 2 || strcmp(v[1], "--gids=5,27") != 0) {
		fprintf(stderr, "FAIL argv: %d args\n", n);
		failures++;
	}
	free_argv(v);

	printf("%d passed, %d failed\n", failures ? 0 : 1, failures);
	return failures != 0;
}
