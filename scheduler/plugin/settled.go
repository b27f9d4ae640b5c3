// Jobs the lifecycle loop has nothing left to do for, so that its passes skip them.

package plugin

import (
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"sunk.dev/sunk/pkg/slurm"
)

// settledJobs are the jobs that are no placeholder, and the ended jobs of single pods whose pod
// is gone. A pass could do nothing for them (no pod to evict, nothing to cancel), yet the job list keeps every ended job for
// MinJobAge: thousands during a burst, each copied out of the cache, judged and matched to pods
// at every pass (BenchmarkThousandPods: 1.4 s of the scheduler's CPU a run). A gang's job is
// never settled (a member of the same gang name may come back), and any change of a settled job
// in the list unsettles it: a requeue, or a new owner or comment (whether a job is a
// placeholder depends on these alone, see verdicts).
type settledJobs struct {
	mu  sync.Mutex
	ids map[uint32]bool
}

func newSettledJobs() *settledJobs { return &settledJobs{ids: map[uint32]bool{}} }

func (s *settledJobs) has(id uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// settleIfDone settles job j, ended, when it is a single pod's job and that pod is gone:
// members are the job's pods as membersOf found them in the pass's pod cache (nil if gone).
func (s *settledJobs) settleIfDone(j *slurm.Job, keys []string, members []*v1.Pod) {
	if isLive(j) || len(keys) != 1 || !strings.HasPrefix(keys[0], podKey) || len(members) != 1 || members[0] != nil {
		return
	}
	s.settle(j.ID)
}

func (s *settledJobs) settle(id uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = true
}

// changed unsettles job id: the list shows it changed, or no longer shows it.
func (s *settledJobs) changed(id uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id)
}
