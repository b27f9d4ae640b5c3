package slurm

import "testing"

// TestJobListerChoosesTheCheaperRead: changed jobs are fetched one by one only while that is
// expected to end sooner than a full list, by the moving averages of both, and never beyond
// maxFetch.
func TestJobListerChoosesTheCheaperRead(t *testing.T) {
	rounds := func(n int) int { return (n + JobInformerConns - 1) / JobInformerConns }
	for _, tc := range []struct {
		name              string
		n, maxFetch       int
		fullCost, getCost float64
		want              bool
	}{
		{"nothing timed yet", 10, 100, 0, 0, true},
		{"over maxFetch", 101, 100, 10, 0.001, false},
		{"fetch rounds cheaper", JobInformerConns * 3, 100, 1, 0.1, true},
		{"full list cheaper", JobInformerConns * 3, 100, 0.25, 0.1, false},
		{"equal costs fetch", JobInformerConns * 2, 100, 0.2, 0.1, true},
	} {
		l := &jobLister{maxFetch: tc.maxFetch, fullCost: tc.fullCost, getCost: tc.getCost}
		if got := l.fetchCheaper(tc.n); got != tc.want {
			t.Errorf("%s: fetchCheaper(%d) with %d rounds at %gs vs full %gs = %v, want %v",
				tc.name, tc.n, rounds(tc.n), tc.getCost, tc.fullCost, got, tc.want)
		}
	}
}
