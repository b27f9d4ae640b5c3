package slurm

import (
	"slices"
	"testing"
)

func TestCompressHostlist(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"gpu-0"}, "gpu-0"},
		{[]string{"gpu-3", "gpu-1", "gpu-0", "gpu-2", "gpu-7", "gpu-7"}, "gpu-[0-3,7]"},
		{[]string{"b-1", "a-2", "a-1", "login"}, "a-[1-2],b-1,login"},
		// Padded, long and bracket-carrying names stay as they are.
		{[]string{"n01", "n02", "n1"}, "n01,n02,n1"},
		{[]string{"x1234567890", "x1234567891"}, "x1234567890,x1234567891"},
		// PerNode member names: the trailing number is the node address's last octet.
		{[]string{"gpu-ip-10-0-3-4", "gpu-ip-10-0-3-5", "gpu-ip-10-0-4-4"}, "gpu-ip-10-0-3-[4-5],gpu-ip-10-0-4-4"},
	} {
		got := CompressHostlist(tc.names)
		if got != tc.want {
			t.Errorf("CompressHostlist(%q) = %q, want %q", tc.names, got, tc.want)
		}
		if got == "" {
			continue
		}
		back, err := ExpandHostlist(got)
		if err != nil {
			t.Fatalf("ExpandHostlist(%q): %v", got, err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(tc.names)))
		slices.Sort(back)
		if !slices.Equal(back, want) {
			t.Errorf("round trip of %q: %q", tc.names, back)
		}
	}
}
