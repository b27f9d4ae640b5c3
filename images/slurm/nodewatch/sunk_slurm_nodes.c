/*
 * sunk-slurm-nodes: Slurm's node table as a stream of changes, read through Slurm's own library
 * (docs/syncer.md, "The node watcher").
 *
 * Every interval it asks slurmctld for the node table with update_time (slurm_load_node over
 * Slurm's binary RPC): an unchanged table costs one small RPC. When slurmctld answers with the
 * table (a change, or only its timestamp moved, as every ping cycle does), each node's record is
 * formatted as one JSON line and compared with the line printed last time; only nodes whose
 * line differs, and nodes that are gone, are printed. Every poll ends with a "sync" line, so the
 * reader knows the table was read (and when), not only that nothing was printed.
 *
 * Output, one JSON object per line on stdout:
 *   {"node":{...}}                         a node that is new or changed (fields below)
 *   {"gone":"NAME"}                        a node that no longer exists
 *   {"sync":{"full":B,"last_update":T,"nodes":N,"changed":K}}
 *                                          the end of one poll; full=true: the lines since the
 *                                          previous sync are the whole table (the first answer,
 *                                          or the first after an error)
 *   {"error":"TEXT"}                       a poll failed; nothing is known until the next full
 *
 * It exits when stdout is closed (its reader is gone). Build: Makefile (hack/nodewatch.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "jsonline.h"

/*
 * The names slurmctld's own tools (scontrol, slurmrestd) give node states: exported by
 * libslurmfull in 24.11 and 26.05 (strong aliases in src/common/slurm_protocol_defs.c), but not
 * declared in slurm.h.
 */
extern const char *slurm_node_state_base_string(uint32_t state);
extern const char *slurm_node_state_flag_string_single(uint32_t *state);

/* What sunk asks slurmrestd for (pkg/slurm nodeFlags): FUTURE too, or nodes created with
 * state=future are missing. */
#define SHOW (SHOW_ALL | SHOW_DETAIL | SHOW_MIXED | SHOW_FUTURE)

/* The node lines printed last, by name: an open-addressing table rebuilt at every answer. */
typedef struct {
	char *name, *line;
} entry_t;
typedef struct {
	entry_t *e;
	size_t cap;
} table_t;

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static entry_t *slot(table_t *t, const char *name)
{
	size_t i = hash(name) & (t->cap - 1);
	while (t->e[i].name && strcmp(t->e[i].name, name))
		i = (i + 1) & (t->cap - 1);
	return &t->e[i];
}

static void table_free(table_t *t)
{
	for (size_t i = 0; i < t->cap; i++) {
		free(t->e[i].name);
		free(t->e[i].line);
	}
	free(t->e);
	t->e = NULL;
	t->cap = 0;
}

static const char *user_name(uint32_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];
	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res) {
		snprintf(buf, len, "%s", pw.pw_name);
	} else {
		snprintf(buf, len, "%u", uid);
	}
	return buf;
}

/* node_line formats one node's record as sunk reads it (pkg/nodewatch, slurm.Node). */
static char *node_line(node_info_t *n)
{
	jl_t j;
	char uname[256];
	uint32_t state = n->node_state, flags = state;
	const char *flag;
	uint64_t alloc_mem = 0;
	uint16_t alloc_cpus = 0;

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
	alloc_cpus = n->alloc_cpus;
	alloc_mem = n->alloc_memory;
#else
	slurm_get_select_nodeinfo(n->select_nodeinfo, SELECT_NODEDATA_SUBCNT, NODE_STATE_ALLOCATED, &alloc_cpus);
	slurm_get_select_nodeinfo(n->select_nodeinfo, SELECT_NODEDATA_MEM_ALLOC, NODE_STATE_ALLOCATED, &alloc_mem);
#endif
	jl_open(&j);
	jl_raw(&j, "{\"node\":{");
	jl_str(&j, "name", n->name);
	jl_str(&j, "hostname", n->node_hostname);
	jl_str(&j, "address", n->node_addr);
	jl_key(&j, "state");
	jl_raw(&j, "[");
	jl_elem(&j, slurm_node_state_base_string(state), 1);
	flags = state & NODE_STATE_FLAGS;
	while ((flag = slurm_node_state_flag_string_single(&flags)))
		jl_elem(&j, flag, 0);
	jl_raw(&j, "]");
	jl_num(&j, "state_bits", state);
	jl_str(&j, "reason", n->reason);
	if (n->reason && n->reason[0])
		jl_str(&j, "reason_set_by", user_name(n->reason_uid, uname, sizeof(uname)));
	jl_num(&j, "reason_time", n->reason ? (int64_t)n->reason_time : 0);
	jl_str(&j, "comment", n->comment);
	jl_str(&j, "extra", n->extra);
	jl_str(&j, "features", n->features);
	jl_str(&j, "features_act", n->features_act ? n->features_act : n->features);
	jl_str(&j, "partitions", n->partitions);
	jl_str(&j, "gres", n->gres);
	jl_str(&j, "gres_used", n->gres_used);
	jl_num(&j, "cpus", n->cpus);
	jl_num(&j, "alloc_cpus", alloc_cpus);
	jl_num(&j, "real_memory", (int64_t)n->real_memory);
	jl_num(&j, "alloc_memory", (int64_t)alloc_mem);
	jl_num(&j, "weight", n->weight);
	jl_str(&j, "version", n->version);
	jl_num(&j, "boot_time", (int64_t)n->boot_time);
	jl_num(&j, "slurmd_start_time", (int64_t)n->slurmd_start_time);
	jl_num(&j, "last_busy", (int64_t)n->last_busy);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
	/* slurmrestd's "topology" (v0.0.43 on): the operator plans topology_str moves on it. */
	jl_str(&j, "topology", n->topology_str);
#endif
	jl_raw(&j, "}}\n");
	return jl_close(&j);
}

/* diff prints what changed between the previous table and this answer and makes it the table. */
static int diff(table_t *prev, node_info_msg_t *msg, int full, int *count)
{
	table_t next = {0};
	int changed = 0;

	*count = 0;
	next.cap = 64;
	while (next.cap < 2 * (size_t)msg->record_count + 1)
		next.cap *= 2;
	next.e = calloc(next.cap, sizeof(entry_t));
	for (uint32_t i = 0; i < msg->record_count; i++) {
		node_info_t *n = &msg->node_array[i];
		if (!n->name) /* a blank slot of the dynamic node table */
			continue;
		char *line = node_line(n);
		(*count)++;
		entry_t *old = prev->cap ? slot(prev, n->name) : NULL;
		entry_t *e = slot(&next, n->name);
		if (e->name) { /* a name twice: keep the first */
			free(line);
			continue;
		}
		if (full || !old || !old->name || strcmp(old->line, line)) {
			fputs(line, stdout);
			changed++;
		}
		e->name = strdup(n->name);
		e->line = line;
		if (old && old->name) {
			free(old->line);
			old->line = NULL; /* seen: not gone */
		}
	}
	for (size_t i = 0; i < prev->cap; i++) {
		entry_t *e = &prev->e[i];
		if (e->name && e->line && !full) {
			jl_t j;
			jl_open(&j);
			jl_raw(&j, "{");
			jl_str(&j, "gone", e->name);
			jl_raw(&j, "}\n");
			char *s = jl_close(&j);
			fputs(s, stdout);
			free(s);
			changed++;
		}
	}
	table_free(prev);
	*prev = next;
	return changed;
}

static void print_error(const char *what, int err)
{
	jl_t j;
	char msg[512];
	snprintf(msg, sizeof(msg), "%s: %s", what, slurm_strerror(err));
	jl_open(&j);
	jl_raw(&j, "{");
	jl_str(&j, "error", msg);
	jl_raw(&j, "}\n");
	char *s = jl_close(&j);
	fputs(s, stdout);
	free(s);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int interval_ms = 200, c;
	table_t table = {0};
	node_info_msg_t *nodes = NULL;
	partition_info_msg_t *parts = NULL;
	int full = 1;

	while ((c = getopt(argc, argv, "i:")) != -1) {
		switch (c) {
		case 'i':
			interval_ms = atoi(optarg);
			if (interval_ms < 10) {
				fprintf(stderr, "sunk-slurm-nodes: -i %s: the interval is in milliseconds, at least 10\n", optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: sunk-slurm-nodes [-i interval_ms]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_DFL);
	slurm_init(NULL);

	for (;;) {
		node_info_msg_t *n2 = NULL;
		partition_info_msg_t *p2 = NULL;
		int changed_nodes = 0, changed_parts = 0, err = 0;
		static int count;
		const char *what = NULL;

		if (slurm_load_node(nodes ? nodes->last_update : 0, &n2, SHOW) == SLURM_SUCCESS) {
			changed_nodes = 1;
		} else if ((err = errno) != SLURM_NO_CHANGE_IN_DATA) {
			what = "loading the node table";
		} else {
			err = 0;
		}
		if (!what) {
			/* A changed node table reloads the whole partition table: a partition's node
			 * indexes (node_inx, which slurm_populate_node_partitions maps onto the node
			 * array) follow the node table, and a dynamic node that registers joins a
			 * Nodes=ALL partition without moving the partition table's update time. Asking
			 * with that time gave the new node no partitions at all. */
			if (slurm_load_partitions((parts && !changed_nodes) ? parts->last_update : 0, &p2, SHOW) == SLURM_SUCCESS) {
				changed_parts = 1;
			} else if ((err = errno) != SLURM_NO_CHANGE_IN_DATA) {
				what = "loading the partition table";
			} else {
				err = 0;
			}
		}
		if (what) {
			/* Forget everything: the next answer is a whole table, whatever happened meanwhile
			 * (a slurmctld restart, a failover to a backup whose clock differs). */
			print_error(what, err);
			slurm_free_node_info_msg(n2);
			slurm_free_partition_info_msg(p2);
			slurm_free_node_info_msg(nodes);
			slurm_free_partition_info_msg(parts);
			nodes = NULL;
			parts = NULL;
			table_free(&table);
			full = 1;
		} else {
			int changed = 0;
			if (changed_nodes) {
				slurm_free_node_info_msg(nodes);
				nodes = n2;
			}
			if (changed_parts) {
				slurm_free_partition_info_msg(parts);
				parts = p2;
			}
			if (changed_nodes || changed_parts) {
				slurm_populate_node_partitions(nodes, parts);
				changed = diff(&table, nodes, full, &count);
			}
			printf("{\"sync\":{\"full\":%s,\"last_update\":%lld,\"nodes\":%d,\"changed\":%d}}\n",
			       full ? "true" : "false", (long long)nodes->last_update, count, changed);
			if (fflush(stdout) == EOF)
				return 0;
			full = 0;
		}
		struct timespec ts = {interval_ms / 1000, (long)(interval_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
}
