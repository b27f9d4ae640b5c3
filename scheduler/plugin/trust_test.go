package plugin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"sunk.dev/sunk/pkg/slurm"
)

// testMarker marks the test beds' jobs.
var testMarker = marker{key: []byte("0123456789abcdef0123456789abcdef")}

// Only a job of the scheduler's user whose comment carries a mark made with the scheduler's key
// is a placeholder; a job with a placeholder-looking comment that fails either check says why.
func TestJudge(t *testing.T) {
	gk := gangJobKey("ns", "g", nil)
	pod := testMarker.comment(podJobKey("a"))
	gang := testMarker.comment(gk)
	otherKey := marker{key: []byte("another key of thirty-two bytes!")}
	body, _, _ := strings.Cut(pod, markSep)
	cases := []struct {
		name, user, comment string
		keys                []string
		why                 string
	}{
		{"its own pod job", "slurm", pod, []string{"pod:a"}, ""},
		{"its own gang job", "slurm", gang, []string{gk}, ""},
		{"another user's copy of a pod job", "mallory", pod, nil, untrustedOwner},
		{"another user's copy of a gang job", "mallory", gang, nil, untrustedOwner},
		{"its user, no mark", "slurm", body, nil, untrustedMark},
		{"its user, a first-format gang comment", "slurm", "sunk-pod:a,b", nil, untrustedMark},
		{"its user, another key's mark", "slurm", otherKey.comment(podJobKey("a")), nil, untrustedMark},
		{"its user, a mark moved to another pod", "slurm", strings.Replace(pod, "sunk-pod:a", "sunk-pod:b", 1), nil, untrustedMark},
		{"its user, a truncated mark", "slurm", pod[:len(pod)-1], nil, untrustedMark},
		{"its user, an empty mark", "slurm", body + markSep, nil, untrustedMark},
		{"a batch job", "slurm", "nightly build", nil, ""},
		{"another user's batch job", "mallory", "", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keys, why := testMarker.judge(&slurm.Job{UserName: c.user, Comment: c.comment}, "slurm")
			if !slices.Equal(keys, c.keys) || why != c.why {
				t.Fatalf("comment %q of %s: keys %v, untrusted %q; want %v, %q", c.comment, c.user, keys, why, c.keys, c.why)
			}
		})
	}
	// The remembered verdicts are the same, first and second time, for every case at once, and
	// for one job whose owner or comment changes from case to case.
	var v verdicts
	for round := range 2 {
		for i, c := range cases {
			for _, id := range []uint32{uint32(i + 1), 1000} {
				keys, why := v.judge(testMarker, &slurm.Job{ID: id, UserName: c.user, Comment: c.comment}, "slurm")
				if !slices.Equal(keys, c.keys) || why != c.why {
					t.Fatalf("round %d, %s, job %d: remembered keys %v, untrusted %q; want %v, %q", round, c.name, id, keys, why, c.keys, c.why)
				}
			}
		}
	}
	// Without a key nothing is trusted (a zero marker must not verify empty MACs).
	if keys, why := (marker{}).judge(&slurm.Job{UserName: "slurm", Comment: pod}, "slurm"); keys != nil || why != untrustedMark {
		t.Fatalf("zero marker: keys %v, untrusted %q", keys, why)
	}
	if n := len(pod); n > 1024 {
		t.Fatalf("a marked comment is %d bytes, over Slurm's 1,024", n)
	}
}

// An untrusted job is counted and logged once however many passes see it.
func TestUntrustedReportedOnce(t *testing.T) {
	u := untrustedJobs{seen: map[uint32]time.Time{}}
	before := counterValue(t, untrustedOwner)
	j := &slurm.Job{ID: 9, UserName: "mallory", Comment: testMarker.comment(podJobKey("a"))}
	for range 3 {
		u.report(j, untrustedOwner)
	}
	if got := counterValue(t, untrustedOwner) - before; got != 1 {
		t.Fatalf("counted %v times, want 1", got)
	}
	u.forget(func(uint32) bool { return false })
	u.report(j, untrustedOwner)
	if got := counterValue(t, untrustedOwner) - before; got != 1 {
		t.Fatalf("a recent report was forgotten: counted %v times", got)
	}
}

func TestLoadMarker(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(short, []byte("tooshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, append(testMarker.key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadMarker(short); err == nil {
		t.Error("a key of 8 bytes was accepted")
	}
	if _, err := loadMarker(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing key file was accepted")
	}
	m, err := loadMarker(good)
	if err != nil {
		t.Fatal(err)
	}
	if m.comment("pod:a") != testMarker.comment("pod:a") {
		t.Error("the key file's trailing newline changed the marks")
	}
	if c, err := MarkedComment(good, "sunk-pod:a"); err != nil || c != testMarker.comment("pod:a") {
		t.Errorf("MarkedComment: %q %v, want the scheduler's %q", c, err, testMarker.comment("pod:a"))
	}
}

func counterValue(t *testing.T, reason string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := jobsUntrusted.WithLabelValues(reason).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
