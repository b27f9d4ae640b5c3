/* The Slurm-free part of sunk-slurm-nodes: JSON lines as Go's encoding/json reads them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonline.h"

static int fails;

static void expect(const char *what, char *got, const char *want)
{
	if (strcmp(got, want)) {
		fprintf(stderr, "FAIL %s:\n got  %s\n want %s\n", what, got, want);
		fails++;
	}
	free(got);
}

int main(void)
{
	jl_t j;

	jl_open(&j);
	jl_raw(&j, "{\"node\":{");
	jl_str(&j, "name", "n1");
	jl_key(&j, "state");
	jl_raw(&j, "[");
	jl_elem(&j, "IDLE", 1);
	jl_elem(&j, "DRAIN", 0);
	jl_raw(&j, "]");
	jl_num(&j, "cpus", -3);
	jl_str(&j, "reason", NULL);
	jl_raw(&j, "}}\n");
	expect("a node", jl_close(&j),
	       "{\"node\":{\"name\":\"n1\",\"state\":[\"IDLE\",\"DRAIN\"],\"cpus\":-3,\"reason\":\"\"}}\n");

	jl_open(&j);
	jl_raw(&j, "{");
	jl_str(&j, "error", "a \"quoted\"\\ line\nwith\ttabs and \x01");
	jl_raw(&j, "}");
	expect("escapes", jl_close(&j), "{\"error\":\"a \\\"quoted\\\"\\\\ line\\nwith\\ttabs and \\u0001\"}");

	jl_open(&j);
	jl_raw(&j, "{");
	jl_str(&j, "reason", "caf\xc3\xa9");
	jl_raw(&j, "}");
	expect("UTF-8 passes", jl_close(&j), "{\"reason\":\"caf\xc3\xa9\"}");

	if (fails)
		return 1;
	printf("ok\n");
	return 0;
}
