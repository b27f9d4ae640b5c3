package slurm

import (
	"reflect"
	"testing"
)

func TestParseGres(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]int64
	}{
		{"", map[string]int64{}},
		{"(null)", map[string]int64{}},
		{"gpu:h100:4", map[string]int64{"gpu:h100": 4}},
		{"gpu:8", map[string]int64{"gpu": 8}},
		{"gpu", map[string]int64{"gpu": 1}},
		{"gpu:h100", map[string]int64{"gpu:h100": 1}},
		{"gpu:a100:2(S:0-1),gpu:h100:2", map[string]int64{"gpu:a100": 2, "gpu:h100": 2}},
		{"gpu:a100:1(IDX:0),shard:a100:0(0/8,0/8)", map[string]int64{"gpu:a100": 1, "shard:a100": 0}},
		{"gpu:h100:2,gpu:h100:2", map[string]int64{"gpu:h100": 4}},
		{"bandwidth:no_consume:4G", map[string]int64{"bandwidth": 4 << 30}},
		{"gpu:tesla_v100_sxm2_16gb:1", map[string]int64{"gpu:tesla_v100_sxm2_16gb": 1}},
	} {
		got, err := ParseGres(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseGres(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"gpu:h100:x:4", ":4", "gpu::4", "a:b:c"} {
		if got, err := ParseGres(bad); err == nil {
			t.Errorf("ParseGres(%q) = %v, want an error", bad, got)
		}
	}
}
