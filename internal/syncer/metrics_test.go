package syncer

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// A cluster's counters exist at zero from its start, and a held drain is counted by its cause
// without the cordon's free-text reason.
func TestMetricsCountCausesNotReasons(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.begin("ns", "c1")
	m.drainHeld("ns", "c1", CauseCordoned+" (kernel upgrade)")
	m.drainHeld("ns", "c1", CauseCordoned+" (bad DIMM)")
	want := `# HELP sunk_syncer_drains_held_total x
# TYPE sunk_syncer_drains_held_total counter
sunk_syncer_drains_held_total{cause="GRES mismatch",cluster="ns/c1"} 0
sunk_syncer_drains_held_total{cause="node NotReady",cluster="ns/c1"} 0
sunk_syncer_drains_held_total{cause="node cordoned",cluster="ns/c1"} 2
sunk_syncer_drains_held_total{cause="pod being deleted",cluster="ns/c1"} 0
sunk_syncer_drains_held_total{cause="pod not Ready",cluster="ns/c1"} 0
`
	got, err := testutil.CollectAndFormat(m.held, expfmt.TypeTextPlain, "sunk_syncer_drains_held_total")
	if err != nil {
		t.Fatal(err)
	}
	// Compare the samples only; the help text is the metric's own.
	if samples(string(got)) != samples(want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if n := testutil.CollectAndCount(m.errors); n != 2 {
		t.Errorf("error series at start: %d, want 2 (kube_write, slurm_write)", n)
	}
}

func samples(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
