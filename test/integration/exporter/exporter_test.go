//go:build integration

// Package exporter_test runs the Slurm exporter (internal/exporter) against the real Slurm
// 24.11 of the test bed (hack/env-slurm.sh): its values for a running job, and its REST cost
// counted by pkg/slurm's request metrics.
package exporter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"sunk.dev/sunk/internal/exporter"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

const name = "test/slurm"

// value returns the exporter's value of metric with the given labels (besides cluster), and
// whether it has that series.
func value(t testing.TB, e *exporter.Exporter, metric string, labels map[string]string) (float64, bool) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
	series:
		for _, m := range mf.Metric {
			got := map[string]string{}
			for _, l := range m.Label {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			if m.Gauge != nil {
				return m.Gauge.GetValue(), true
			}
			return m.Counter.GetValue(), true
		}
	}
	return 0, false
}

// requests counts the slurmrestd requests the exporter made, leaving out the "retried" ones:
// Slurm 24.11 answers an incremental GET /nodes with HTTP 500 "Unable to query partitions" when
// only nodes changed (see slurm.isPartitionsNoChange), and the client lists again; how often that
// happens depends on slurmctld's timing, not on the exporter.
func requests(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "sunk_slurm_rest_requests_total" {
			for _, m := range mf.Metric {
				if !hasLabel(m.GetLabel(), "outcome", slurm.OutcomeRetried) {
					total += m.Counter.GetValue()
				}
			}
		}
	}
	return total
}

func hasLabel(labels []*dto.LabelPair, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestRunningJob: one exclusive job running on one node → that node counts as allocated with
// every CPU allocated, the job counts as running in its partition, and scrapes between two
// refreshes send slurmrestd nothing.
func TestRunningJob(t *testing.T) {
	env := testenv.Slurm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	restReg := prometheus.NewRegistry()
	m, err := slurm.NewMetrics(restReg)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(t), slurm.WithLifetime(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c, err := slurm.New(slurm.Config{URL: env.RESTURL, Tokens: tokens, Metrics: m, Cluster: name})
	if err != nil {
		t.Fatal(err)
	}
	e := exporter.New(func() []exporter.Target { return []exporter.Target{{Name: name, Slurm: c}} }, exporter.Options{})

	node := env.Nodes[len(env.Nodes)-1]
	r, err := c.SubmitJob(ctx, slurm.JobSubmit{
		Name: "sunk-it-exporter", Script: "#!/bin/sh\nsleep 300\n", Partition: "all", MinNodes: 1, MaxNodes: 1,
		RequiredNodes: []string{node}, Exclusive: true, TimeLimit: 5 * time.Minute, StdOut: "/dev/null",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
	wait.For(t, "the job runs", 90*time.Second, 200*time.Millisecond, func() error {
		j, err := c.GetJob(ctx, r.JobID)
		if err != nil {
			return err
		}
		if j.BaseState() != "RUNNING" {
			return fmt.Errorf("job %d is %v (%s)", j.ID, j.State, j.StateReason)
		}
		return nil
	})
	n, err := c.GetNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}

	e.Refresh(ctx)
	if err := e.Err(name); err != nil {
		t.Fatal(err)
	}
	if v, _ := value(t, e, "slurm_up", nil); v != 1 {
		t.Fatalf("slurm_up %v", v)
	}
	node1 := map[string]string{"node": node}
	if v, ok := value(t, e, "slurm_node_info", map[string]string{"node": node, "state": "allocated"}); !ok || v != 1 {
		t.Errorf("slurm_node_info of %s: no series with state allocated (%v, %v)", node, v, ok)
	}
	cpus, _ := value(t, e, "slurm_node_cpus", node1)
	alloc, _ := value(t, e, "slurm_node_cpus_allocated", node1)
	idle, _ := value(t, e, "slurm_node_cpus_idle", node1)
	if cpus != float64(n.CPUs) || cpus == 0 || alloc != cpus || idle != 0 {
		t.Errorf("%s (%d CPUs, exclusive job): cpus %v, allocated %v, idle %v", node, n.CPUs, cpus, alloc, idle)
	}
	if mem, _ := value(t, e, "slurm_node_memory_bytes", node1); mem != float64(n.RealMemoryMB)*(1<<20) || mem == 0 {
		t.Errorf("%s: memory %v bytes, RealMemory %d MB", node, mem, n.RealMemoryMB)
	}
	if v, _ := value(t, e, "slurm_jobs", map[string]string{"partition": "all", "state": "running"}); v < 1 {
		t.Errorf("slurm_jobs{partition=all,state=running} = %v", v)
	}
	if v, _ := value(t, e, "slurm_partition_cpus_allocated", map[string]string{"partition": "all"}); v < cpus {
		t.Errorf("slurm_partition_cpus_allocated{partition=all} = %v, below the job's node's %v", v, cpus)
	}
	if v, ok := value(t, e, "slurm_diag_reset_timestamp_seconds", nil); !ok || v <= 0 {
		t.Errorf("slurm_diag_reset_timestamp_seconds %v, %v", v, ok)
	}

	// Scrapes between refreshes cost slurmrestd nothing; a refresh costs the same few requests.
	before := requests(t, restReg)
	for range 50 {
		if n := testutil.CollectAndCount(e); n == 0 {
			t.Fatal("a scrape collected nothing")
		}
	}
	if after := requests(t, restReg); after != before {
		t.Fatalf("50 scrapes sent %v requests to slurmrestd", after-before)
	}
	e.Refresh(ctx)
	if got := requests(t, restReg) - before; got != 4 {
		t.Errorf("one refresh sent %v requests, want 4 (nodes, jobs, partitions, diag)", got)
	}

	// Job gone: the node is no longer allocated to it.
	if err := c.CancelJob(ctx, r.JobID); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the node is idle again", 90*time.Second, 500*time.Millisecond, func() error {
		e.Refresh(ctx)
		if v, _ := value(t, e, "slurm_node_cpus_allocated", node1); v != 0 {
			return fmt.Errorf("%s: %v CPUs allocated", node, v)
		}
		if v, ok := value(t, e, "slurm_node_info", map[string]string{"node": node, "state": "idle"}); !ok || v != 1 {
			return fmt.Errorf("%s is not idle", node)
		}
		return nil
	})
}
