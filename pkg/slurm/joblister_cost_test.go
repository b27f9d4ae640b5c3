package slurm

import (
	"testing"
	"time"
)

// TestJobListerChoosesTheCheaperRead: changed jobs are fetched one by one only while that is
// expected to end sooner than a full list of the table as large as it is now, by the moving
// averages of a fetch round and of a full list per job, and never beyond maxFetch.
func TestJobListerChoosesTheCheaperRead(t *testing.T) {
	rounds := func(n int) int { return (n + JobInformerConns - 1) / JobInformerConns }
	for _, tc := range []struct {
		name                    string
		n, jobs, maxFetch       int
		fullCostPerJob, getCost float64
		want                    bool
	}{
		{"nothing timed yet", 10, 100, 100, 0, 0, true},
		{"over maxFetch", 101, 1000, 100, 10, 0.001, false},
		{"fetch rounds cheaper", JobInformerConns * 3, 100, 100, 0.01, 0.1, true},
		{"full list cheaper", JobInformerConns * 3, 100, 100, 0.0025, 0.1, false},
		{"equal costs fetch", JobInformerConns * 2, 100, 100, 0.002, 0.1, true},
		// Timed on 10 jobs at 1 ms each, the full list of the 600 now is 0.6 s: fetching 32
		// in 4 rounds of 60 ms is cheaper, though 60 ms is more than the 10 ms list timed.
		{"the table grew since the full list was timed", 32, 600, 256, 0.001, 0.06, true},
	} {
		l := &jobLister{maxFetch: tc.maxFetch, fullCostPerJob: tc.fullCostPerJob, getCost: tc.getCost}
		if got := l.fetchCheaper(tc.n, tc.jobs); got != tc.want {
			t.Errorf("%s: fetchCheaper(%d, %d) with %d rounds at %gs vs full %gs a job = %v, want %v",
				tc.name, tc.n, tc.jobs, rounds(tc.n), tc.getCost, tc.fullCostPerJob, got, tc.want)
		}
	}
}

// TestFullListsSpacedByTheirCost: a slow full list holds up the poll that makes it, so slow ones
// come at most once per ten times what the last took; fast ones every FullListEvery.
func TestFullListsSpacedByTheirCost(t *testing.T) {
	for _, tc := range []struct {
		took, want time.Duration
	}{
		{0, 30 * time.Second},
		{900 * time.Millisecond, 30 * time.Second},
		{2 * time.Second, 30 * time.Second},
		{5 * time.Second, 50 * time.Second},
		{14 * time.Second, 140 * time.Second},
	} {
		l := &jobLister{fullEvery: 30 * time.Second, lastFullTook: tc.took}
		if got := l.fullListEvery(); got != tc.want {
			t.Errorf("last full list took %v: next after %v, want %v", tc.took, got, tc.want)
		}
	}
}
