package soak

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP x y
sunk_slurm_rest_requests_total{endpoint="GET /nodes/",outcome="ok"} 12
sunk_syncer_sync_latency_seconds_bucket{cluster="slurm/demo",direction="k8s_to_slurm",le="+Inf"} 3
weird{v="a\"b,c}"} 1e3
go_goroutines 42
`
	s, err := ParseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 4 || s[0].Labels["endpoint"] != "GET /nodes/" || s[0].Value != 12 || s[2].Labels["v"] != `a"b,c}` || s[2].Value != 1000 {
		t.Fatalf("%+v", s)
	}
	if v, ok := Find(s, "go_goroutines", nil); !ok || v != 42 {
		t.Fatalf("go_goroutines %v %v", v, ok)
	}
	if _, err := ParseMetrics("bad{x=1} 2"); err == nil {
		t.Fatal("want an error for an unquoted label")
	}
}

func TestCountersAcrossRestarts(t *testing.T) {
	var c Counters
	mk := func(v float64) []Series { return []Series{{Name: "c", Labels: map[string]string{}, Value: v}} }
	if d := c.Delta(mk(10)); len(d) != 0 {
		t.Fatalf("first scrape is the base: %v", d)
	}
	if d := c.Delta(mk(15))["c"]; d != 5 {
		t.Fatalf("delta %v", d)
	}
	if d := c.Delta(mk(3))["c"]; d != 3 { // the process restarted
		t.Fatalf("delta after reset %v", d)
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{0.1: 50, 0.5: 90, 1: 99, 2.5: 100, math.Inf(1): 100}
	if q, up := h.Quantile(0.5); q != 0.1 || up != 0.1 {
		t.Fatalf("p50 %v %v", q, up)
	}
	if q, up := h.Quantile(0.99); q != 1 || up != 1 {
		t.Fatalf("p99 %v %v", q, up)
	}
	if q, _ := h.Quantile(0.7); math.Abs(q-0.3) > 1e-9 {
		t.Fatalf("p70 %v", q)
	}
	if q, _ := (Histogram{}).Quantile(0.5); !math.IsNaN(q) {
		t.Fatalf("empty %v", q)
	}
	if q, _ := (Histogram{1: 0, math.Inf(1): 4}).Quantile(0.5); q != 1 {
		t.Fatalf("+Inf bucket %v", q)
	}
}

func TestProcNetTCP(t *testing.T) {
	tbl := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1AA4 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 1 1 0 100 0 0 10 0
   1: 0500580A:1AA4 0700580A:D2F0 01 00000000:00000000 00:00000000 00000000   999        0 2 1 0 20 4 30 10 -1
   2: 0100007F:1AA4 0100007F:A000 06 00000000:00000000 00:00000000 00000000   999        0 3 1 0 20 4 30 10 -1
`
	conns, err := ParseProcNetTCP(strings.NewReader(tbl))
	if err != nil || len(conns) != 3 {
		t.Fatal(conns, err)
	}
	c := conns[1]
	if !c.Established || c.LocalPort != 6820 || c.Remote.String() != "10.88.0.7" || c.Local.String() != "10.88.0.5" {
		t.Fatalf("%+v", c)
	}
	if conns[0].Established || conns[2].Established {
		t.Fatal("LISTEN and TIME_WAIT are not established")
	}
	tbl6 := `  sl  local_address                         remote_address                        st
   0: 0000000000000000FFFF00000500580A:1AA4 0000000000000000FFFF00000700580A:D2F0 01 x
`
	c6, err := ParseProcNetTCP(strings.NewReader(tbl6))
	if err != nil || len(c6) != 1 || c6[0].Remote.String() != "10.88.0.7" {
		t.Fatal(c6, err)
	}
}

func TestParseJobsAndNodes(t *testing.T) {
	out := `JobId=12 JobName=soak-batch UserId=root(0) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 ExitCode=0:0 EndTime=2025-01-02T03:04:05 NodeList=compute-[1-2]
JobId=13 ArrayJobId=13 ArrayTaskId=2-5%3 JobName=soak-array JobState=PENDING Reason=JobArrayTaskLimit Restarts=0
JobId=14 ArrayJobId=13 ArrayTaskId=0 JobName=soak-array JobState=RUNNING Reason=None Restarts=1 EndTime=Unknown
`
	jobs := ParseJobs(out)
	refused := ParseJobs("JobId=43 JobName=sunk-slurm-soak-sched-1 JobState=FAILED Reason=BadConstraints Restarts=0 ExitCode=0:1 EndTime=2025-01-02T03:04:05 NodeList=(null)\n")
	if len(refused) != 1 || !refused[0].RefusedAllocation() || jobs[0].RefusedAllocation() {
		t.Fatalf("a refused immediate allocation: %+v", refused)
	}
	if len(jobs) != 2 || jobs[0].ID != "12" || !jobs[0].Terminal() || jobs[0].End.IsZero() || jobs[0].NodeList != "compute-[1-2]" ||
		jobs[1].ID != "14" || jobs[1].Restarts != 1 || jobs[1].Terminal() {
		t.Fatalf("%+v", jobs)
	}
	nodes := ParseNodes("compute-0|idle|none\ncompute-1|drained|k8s: node cordoned (soak)\ncompute-1|drained|k8s: node cordoned (soak)\ncompute-2|draining*|soak: person\n")
	if len(nodes) != 3 || nodes[0].Drained() || !nodes[1].Drained() || nodes[1].Reason != "k8s: node cordoned (soak)" || nodes[2].State != "draining" || !nodes[2].NotResponding || nodes[1].NotResponding {
		t.Fatalf("%+v", nodes)
	}
}

func TestLogShapes(t *testing.T) {
	rep := Repeated([]string{
		"E0102 10:00:01.1 1 x.go:12] lost 3 connections to 10.0.0.5",
		"E0102 10:00:02.7 1 x.go:12] lost 4 connections to 10.0.0.6",
		"once",
	}, 2)
	if len(rep) != 1 || rep[0].N != 2 {
		t.Fatalf("%+v", rep)
	}
}

func TestMedianOf(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{123, 123, 184, 123, 124, 123}, 123}, // one burst sample does not move it
		{[]float64{130, 150, 170}, 150},
		{[]float64{1, 3}, 2},
	} {
		if got := medianOf(c.in); got != c.want {
			t.Errorf("medianOf(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := medianOf(nil); !math.IsNaN(got) {
		t.Errorf("medianOf(nil) = %v, want NaN", got)
	}
}

func TestHeldBySlurm(t *testing.T) {
	jobs := ParseJobs("JobId=170 JobName=soak-batch UserId=root(0) JobState=PENDING Reason=launch_failed_requeued_held Restarts=1 ExitCode=0:0\n" +
		"JobId=171 JobName=soak-batch JobState=PENDING Reason=Resources Restarts=0 ExitCode=0:0\n")
	if len(jobs) != 2 || !jobs[0].HeldBySlurm() || jobs[1].HeldBySlurm() || jobs[0].Terminal() {
		t.Fatalf("%+v", jobs)
	}
}

func TestMarkGone(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 31, 0, 0, time.UTC)
	known := map[string]Job{
		"54": {ID: "54", State: "RUNNING"},   // restored running from a stale state save, then purged
		"55": {ID: "55", State: "COMPLETED"}, // seen ending: stays as seen
		"56": {ID: "56", State: "RUNNING"},   // still listed
		"57": {ID: "57", State: "PENDING"},
	}
	table := ParseJobs("JobId=56 JobName=soak-array JobState=RUNNING Restarts=0\n")
	gone := MarkGone(known, table, at)
	if strings.Join(gone, ",") != "54,57" {
		t.Fatalf("gone %v, want 54,57", gone)
	}
	if j := known["54"]; j.State != Gone || !j.End.Equal(at) || !j.Terminal() {
		t.Errorf("54: %+v", j)
	}
	if known["55"].State != "COMPLETED" || known["56"].State != "RUNNING" {
		t.Errorf("jobs still known changed: %+v", known)
	}
	if again := MarkGone(known, table, at.Add(time.Minute)); len(again) != 0 || !known["54"].End.Equal(at) {
		t.Errorf("a second read marked %v again or moved its end: %+v", again, known["54"])
	}
}
