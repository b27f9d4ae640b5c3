// Command pmi2probe is an MPI-style wire-up without an MPI library: run as each task of
// `srun --mpi=pmi2`, it does what an MPI library's PMI2 code does at MPI_Init, speaking Slurm's
// PMI2 wire protocol (src/plugins/mpi/pmi2) on the socket slurmstepd passes in PMI_FD: the
// PMI1-style "cmd=init" handshake, fullinit, a kvs-put of host-<rank> = its host name,
// kvs-fence (slurmstepd answers once every rank of the step is in, the keys travelling
// through the step's slurmstepd tree and srun: the cross-node wire-up), a kvs-get of every
// rank's key, finalize. It prints one line,
//
//	pmi2probe: rank=R size=N host=<its host> hosts=<host of rank 0>,...,<host of rank N-1>
//
// and exits non-zero, saying why, on any protocol error or an answer (a fence above all) that
// does not come within -timeout. Built static (CGO_ENABLED=0), it runs in any image or root
// filesystem, so tests prove MPI's wire-up across nodes with no MPI in the Slurm image.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for each answer of slurmstepd (a fence's waits for every rank)")
	flag.Parse()
	line, err := run(*timeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pmi2probe: rank %s: %v\n", os.Getenv("PMI_RANK"), err)
		os.Exit(1)
	}
	fmt.Println(line)
}

// task is what slurmstepd tells a task about itself, in the variables mpi/pmi2 sets
// (mpi_pmi2.c mpi_p_slurmstepd_task):
//
//	env_array_overwrite_fmt(env, "PMI_FD", "%u", TASK_PMI_SOCK(mpi_task->ltaskid));
//	env_array_overwrite_fmt(env, "PMI_JOBID", "%s", job_info.pmi_jobid);
//	env_array_overwrite_fmt(env, "PMI_RANK", "%u", mpi_task->gtaskid);
//	env_array_overwrite_fmt(env, "PMI_SIZE", "%u", mpi_task->ntasks);
type task struct {
	fd         int
	jobid      string // "<job>.<step>" (setup.c: xstrfmtcat(job_info.pmi_jobid, "%u.%u", ...))
	rank, size int
	host       string
}

func taskFromEnv() (task, error) {
	var t task
	var err error
	for _, v := range []struct {
		name string
		to   *int
	}{{"PMI_FD", &t.fd}, {"PMI_RANK", &t.rank}, {"PMI_SIZE", &t.size}} {
		s, ok := os.LookupEnv(v.name)
		if !ok {
			return t, fmt.Errorf("%s is not set: run me as a task of srun --mpi=pmi2", v.name)
		}
		if *v.to, err = strconv.Atoi(s); err != nil || *v.to < 0 {
			return t, fmt.Errorf("%s=%q is not a number", v.name, s)
		}
	}
	if t.size == 0 || t.rank >= t.size {
		return t, fmt.Errorf("PMI_RANK=%d of PMI_SIZE=%d", t.rank, t.size)
	}
	if t.jobid = os.Getenv("PMI_JOBID"); t.jobid == "" {
		return t, errors.New("PMI_JOBID is not set: run me as a task of srun --mpi=pmi2")
	}
	if t.host, err = os.Hostname(); err != nil {
		return t, err
	}
	return t, nil
}

func run(timeout time.Duration) (string, error) {
	t, err := taskFromEnv()
	if err != nil {
		return "", err
	}
	nc, err := openFD(t.fd)
	if err != nil {
		return "", err
	}
	c := newConn(nc, timeout)
	defer c.close()
	return probe(c, t)
}

// probe is the wire-up: the commands and their order are those of the reference client,
// contribs/pmi2/pmi2_api.c (PMI2_Init, PMI2_KVS_Put, PMI2_KVS_Fence, PMI2_KVS_Get,
// PMI2_Finalize). It returns the line to print.
func probe(c *conn, t task) (string, error) {
	if err := c.init(); err != nil {
		return "", err
	}
	// PMI2_Init sends PMI_JOBID as it is, PMI_RANK as pmirank (no PMI_ID under Slurm) and
	// threaded=FALSE; slurmstepd's _handle_fullinit refuses a command without all three.
	r, err := c.call("fullinit", pair{"pmijobid", t.jobid}, pair{"pmirank", strconv.Itoa(t.rank)}, pair{"threaded", "FALSE"})
	if err != nil {
		return "", err
	}
	// _handle_fullinit answers "rc=%d;pmi-version=%d;pmi-subversion=%d;rank=%d;size=%d;..."
	// with the rank and size slurmstepd knows: they must be those the environment gave.
	for _, want := range []pair{{"pmi-version", "2"}, {"pmi-subversion", "0"}, {"rank", strconv.Itoa(t.rank)}, {"size", strconv.Itoa(t.size)}} {
		if got, _ := r.get(want.key); got != want.val {
			return "", fmt.Errorf("fullinit: %s=%q, want %q (PMI_RANK=%d PMI_SIZE=%d)", want.key, got, want.val, t.rank, t.size)
		}
	}
	if _, err := c.call("kvs-put", pair{"key", hostKey(t.rank)}, pair{"value", t.host}); err != nil {
		return "", err
	}
	if _, err := c.call("kvs-fence"); err != nil {
		if errors.Is(err, errTimeout) {
			return "", fmt.Errorf("%w: not every rank of the step reached the fence, or the step's slurmstepds cannot reach each other or srun", err)
		}
		return "", err
	}
	hosts := make([]string, t.size)
	for rank := range hosts {
		// PMI2_KVS_Get sends jobid, srcid (PMI2_ID_NULL, -1: any rank) and key.
		r, err := c.call("kvs-get", pair{"jobid", t.jobid}, pair{"srcid", "-1"}, pair{"key", hostKey(rank)})
		if err != nil {
			return "", err
		}
		found, _ := r.get("found")
		v, ok := r.get("value")
		if found != "TRUE" || !ok || v == "" {
			return "", fmt.Errorf("kvs-get %s after the fence: found=%s value=%q", hostKey(rank), found, v)
		}
		hosts[rank] = v
	}
	if _, err := c.call("finalize"); err != nil {
		return "", err
	}
	return fmt.Sprintf("pmi2probe: rank=%d size=%d host=%s hosts=%s", t.rank, t.size, t.host, strings.Join(hosts, ",")), nil
}

func hostKey(rank int) string { return "host-" + strconv.Itoa(rank) }
