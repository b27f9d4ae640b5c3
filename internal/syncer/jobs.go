// Slurm to Kubernetes: the jobs running on each Slurm node, mirrored on its compute pod
// (slurm.sunk.dev/jobs) so that `kubectl sunk jobs` reads them from Kubernetes alone.

package syncer

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// DefaultJobPollInterval is Config.JobPollInterval's default. The job mirror is for people
// (kubectl sunk jobs), not for decisions: a poll every 2 s costs one GET /jobs/state (about
// 80 bytes a job) plus the records of the jobs that started (pkg/slurm's job lister).
const DefaultJobPollInterval = 2 * time.Second

// jobIndex keeps, per Slurm node, the jobs running there, from a job informer's events.
type jobIndex struct {
	mu     sync.Mutex
	onNode map[string]map[uint32]struct{}
	ofJob  map[uint32][]string
}

func newJobIndex() *jobIndex {
	return &jobIndex{onNode: map[string]map[uint32]struct{}{}, ofJob: map[uint32][]string{}}
}

// observe records job j (gone: it left Slurm's job table) and returns the Slurm nodes whose
// running jobs changed. A job counts while its base state is RUNNING; a hostlist that does not
// parse counts as no nodes (the job's next change is read again).
func (x *jobIndex) observe(j slurm.Job, gone bool) []string {
	var nodes []string
	if !gone && j.BaseState() == "RUNNING" && j.Nodes != "" {
		nodes, _ = slurm.ExpandHostlist(j.Nodes)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.ofJob[j.ID]
	if slices.Equal(old, nodes) {
		return nil
	}
	for _, n := range old {
		delete(x.onNode[n], j.ID)
		if len(x.onNode[n]) == 0 {
			delete(x.onNode, n)
		}
	}
	for _, n := range nodes {
		if x.onNode[n] == nil {
			x.onNode[n] = map[uint32]struct{}{}
		}
		x.onNode[n][j.ID] = struct{}{}
	}
	if len(nodes) == 0 {
		delete(x.ofJob, j.ID)
	} else {
		x.ofJob[j.ID] = nodes
	}
	changed := append(slices.Clone(old), nodes...)
	slices.Sort(changed)
	return slices.Compact(changed)
}

// on is the annotation's value for node: its running job ids, ascending, comma-separated ("" for none).
func (x *jobIndex) on(node string) string {
	x.mu.Lock()
	ids := make([]uint32, 0, len(x.onNode[node]))
	for id := range x.onNode[node] {
		ids = append(ids, id)
	}
	x.mu.Unlock()
	slices.SortFunc(ids, func(a, b uint32) int { return cmp.Compare(a, b) })
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ",")
}
