package slurmcluster

import "testing"

func TestRunningVersion(t *testing.T) {
	for _, tc := range []struct {
		name, spec  string
		pods        []string
		want        string
		wantCurrent bool
	}{
		{name: "no pods yet", spec: "26.05", want: "26.05", wantCurrent: true},
		{name: "all on the spec's release", spec: "26.05", pods: []string{"26.05", "26.05"}, want: "26.05", wantCurrent: true},
		{name: "pods from before the label run 24.11", spec: "24.11", pods: []string{"", "24.11"}, want: "24.11", wantCurrent: true},
		{name: "upgrade under way", spec: "26.05", pods: []string{"26.05", ""}, want: "24.11", wantCurrent: false},
		{name: "upgrade under way, labelled", spec: "26.05", pods: []string{"24.11", "26.05"}, want: "24.11", wantCurrent: false},
	} {
		got, current := runningVersion(tc.spec, tc.pods)
		if got != tc.want || current != tc.wantCurrent {
			t.Errorf("%s: runningVersion(%q, %q) = %q, %v; want %q, %v", tc.name, tc.spec, tc.pods, got, current, tc.want, tc.wantCurrent)
		}
	}
}
