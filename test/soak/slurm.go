package soak

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Job is one record of `scontrol -o show job`.
type Job struct {
	ID, Name, State, Reason, ExitCode, NodeList string
	Restarts                                    int
	End                                         time.Time // zero until it ended
}

// Terminal says whether Slurm is done with the job.
func (j Job) Terminal() bool {
	switch j.State {
	case "", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
		"REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT":
		return false
	}
	return true
}

// Gone is the state the soak gives a job that left slurmctld's table (MinJobAge after its end)
// before any read of the table saw it end: one that ended while slurmctld was down and came
// back from its saved state already over, or ended in a gap between samples. It is over; how it
// ended is not known.
const Gone = "GONE"

// MarkGone sets Gone on each job of known, not over yet, that table (a whole read of the job
// table) no longer lists, with End at, and returns their IDs. Without it such a job stays
// "RUNNING" in the soak's books forever and the wait for every job's end never ends.
func MarkGone(known map[string]Job, table []Job, at time.Time) []string {
	listed := make(map[string]bool, len(table))
	for _, j := range table {
		listed[j.ID] = true
	}
	var gone []string
	for id, j := range known {
		if j.Terminal() || listed[id] {
			continue
		}
		j.State, j.End = Gone, at
		known[id] = j
		gone = append(gone, id)
	}
	sort.Strings(gone)
	return gone
}

// HeldBySlurm says the job waits for a person: pending with a hold, as Slurm leaves a batch job
// whose launch failed (Reason=launch_failed_requeued_held). It will not end by itself.
func (j Job) HeldBySlurm() bool {
	return j.State == "PENDING" && strings.Contains(strings.ToLower(j.Reason), "held")
}

// RefusedAllocation says the job ended FAILED without ever having had nodes: an immediate
// allocation that Slurm refused (sunk-scheduler asks for one before it queues a batch job), which
// slurmctld records as a FAILED job, reason BadConstraints. Nothing ran, and nothing was harmed.
func (j Job) RefusedAllocation() bool {
	return j.State == "FAILED" && (j.NodeList == "" || j.NodeList == "(null)")
}

var jobField = regexp.MustCompile(`(?:^|\s)(JobId|JobName|JobState|Reason|Restarts|ExitCode|NodeList|EndTime|ArrayTaskId)=(\S*)`)

// ParseJobs reads `scontrol -o show job` (one job per line). The pending remainder of an array
// (ArrayTaskId=3-9%4) is not a job of its own and is skipped: its tasks show up as they start.
func ParseJobs(out string) []Job {
	var jobs []Job
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "JobId=") {
			continue
		}
		var j Job
		skip := false
		for _, m := range jobField.FindAllStringSubmatch(l, -1) {
			v := m[2]
			switch m[1] {
			case "JobId":
				j.ID = v
			case "JobName":
				j.Name = v
			case "JobState":
				j.State = v
			case "Reason":
				j.Reason = v
			case "Restarts":
				j.Restarts, _ = strconv.Atoi(v)
			case "ExitCode":
				j.ExitCode = v
			case "NodeList":
				j.NodeList = v
			case "EndTime":
				if t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.UTC); err == nil {
					j.End = t
				}
			case "ArrayTaskId":
				skip = strings.ContainsAny(v, "-,%")
			}
		}
		if !skip && j.ID != "" {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// Node is one Slurm node as `sinfo -h -N -o '%N|%T|%E'` shows it.
type Node struct {
	Name, State, Reason string
	NotResponding       bool // sinfo's * suffix
}

// Drained says whether the node carries Slurm's DRAIN flag (drained, draining, drain).
func (n Node) Drained() bool { return strings.HasPrefix(n.State, "drain") }

// ParseNodes reads `sinfo -h -N -o '%N|%T|%E'`; a node listed in several partitions counts once.
func ParseNodes(out string) []Node {
	seen := map[string]bool{}
	var nodes []Node
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(l, "|", 3)
		if len(f) != 3 || seen[f[0]] {
			continue
		}
		seen[f[0]] = true
		reason := f[2]
		if reason == "none" {
			reason = ""
		}
		nodes = append(nodes, Node{Name: f[0], State: strings.TrimRight(f[1], "*~#!%$@^-"), Reason: reason,
			NotResponding: strings.HasSuffix(f[1], "*")})
	}
	return nodes
}
