//go:build soak

// Sampling every 10 s: metrics, connections to slurmrestd, readability, jobs.

package soak

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (s *soak) sampler(ctx context.Context) {
	tick := time.NewTicker(samplePeriod)
	defer tick.Stop()
	s.takeSample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.takeSample()
		}
	}
}

func (s *soak) takeSample() {
	s.mu.Lock()
	sm := sample{t: time.Now(), comps: map[string]*compSample{}, phase: s.phase}
	s.mu.Unlock()
	for _, c := range sunkComps {
		cs := &compSample{rss: math.NaN(), gor: math.NaN()}
		sm.comps[c.name] = cs
		series, _, err := s.scrape(c)
		if err != nil {
			cs.err = err.Error()
			continue
		}
		cs.ok = true
		delta := s.counters[c.name].Delta(series)
		cs.rest = map[string]float64{}
		for _, se := range series {
			if se.Name == "sunk_slurm_rest_requests_total" {
				cs.restSeries = true
				if d := delta[se.Key()]; d > 0 {
					cs.rest[se.Labels["endpoint"]+"|"+se.Labels["outcome"]] += d
				}
			}
		}
		cs.latency = HistogramDelta(series, delta, "sunk_syncer_sync_latency_seconds", "direction")
		if v, ok := Find(series, "process_resident_memory_bytes", nil); ok {
			cs.rss = v
		} else if pid, _, err := s.pid(c); err == nil {
			cs.rss, _ = RSSBytes("/proc", pid)
		}
		if v, ok := Find(series, "go_goroutines", nil); ok {
			cs.gor = v
		}
	}
	s.checkRestarts(sm.t)
	sm.conns, sm.connErr = s.restConns()
	if out, err := s.login("sinfo -h -N -o '%N|%T|%E'; echo ---; scontrol -o show job"); err != nil {
		sm.nodesErr = err.Error()
	} else {
		nodesOut, jobsOut, _ := strings.Cut(out, "---\n")
		sm.nodes = ParseNodes(nodesOut)
		s.trackTable(ParseJobs(jobsOut), sm.t)
	}
	for _, n := range sm.nodes {
		if n.Drained() && strings.HasPrefix(n.Reason, "k8s:") {
			sm.k8sDrains = append(sm.k8sDrains, n)
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
	var conns []string
	for k, v := range sm.conns {
		conns = append(conns, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(conns)
	running := 0
	s.mu.Lock()
	for _, j := range s.jobs {
		if j.State == "RUNNING" {
			running++
		}
	}
	s.mu.Unlock()
	s.t.Logf("[%5.0fs] sample: phase=%s slurm_nodes=%d k8s_drains=%d running_jobs=%d conns{%s} %s",
		time.Since(s.start).Seconds(), sm.phase, len(sm.nodes), len(sm.k8sDrains), running, strings.Join(conns, " "),
		firstNonEmpty(sm.nodesErr, sm.connErr))
}

func firstNonEmpty(v ...string) string {
	for _, x := range v {
		if x != "" {
			return x
		}
	}
	return ""
}

// restConns counts the established connections at slurmrestd's port, by the peer's component:
// slurmrestd's own socket table (/proc/<pid>/net/tcp of its network namespace), each peer IP
// mapped to the pod that has it.
func (s *soak) restConns() (map[string]int, string) {
	pid, _, err := s.pid(slurmrestd)
	if err != nil {
		return nil, err.Error()
	}
	byIP, err := EstablishedTo("/proc", pid, restPort)
	if err != nil {
		return nil, err.Error()
	}
	names := map[string]string{"127.0.0.1": "local", "::1": "local"}
	pods, err := s.cs.CoreV1().Pods("").List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err.Error()
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.Spec.HostNetwork {
			continue
		}
		name := p.Labels["app.kubernetes.io/component"]
		if p.Labels["app.kubernetes.io/instance"] != sunkRelease || name == "" {
			name = p.Namespace + "/" + p.Name
		}
		names[p.Status.PodIP] = name
	}
	if nodes, err := s.cs.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			for _, a := range n.Status.Addresses {
				names[a.Address] = "node"
			}
		}
	}
	out := map[string]int{}
	for ip, n := range byIP {
		name, ok := names[ip]
		if !ok {
			name = ip
		}
		out[name] += n
	}
	return out, ""
}

// readablePoll reads the syncer's readable gauge every second (the 10 s samples would see only
// every tenth second of it).
func (s *soak) readablePoll(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			state := -1
			if series, _, err := s.scrape(syncerC); err == nil {
				for _, se := range series {
					if se.Name == "sunk_syncer_slurm_state_readable" && strings.Contains(se.Labels["cluster"], clusterName) {
						state = int(se.Value)
					}
				}
			}
			s.mu.Lock()
			s.ticks = append(s.ticks, readTick{t: now, dt: now.Sub(last), state: state})
			s.mu.Unlock()
			last = now
		}
	}
}

// trackTable records a whole read of slurmctld's job table: trackJobs, and a job the soak knew
// unfinished that the table no longer lists is Gone (MarkGone).
func (s *soak) trackTable(jobs []Job, at time.Time) {
	s.trackJobs(jobs, at)
	s.mu.Lock()
	gone := MarkGone(s.jobs, jobs, at)
	s.mu.Unlock()
	if len(gone) > 0 {
		s.logf("jobs left slurmctld's table before a read saw them end: %v", gone)
	}
}

func (s *soak) trackJobs(jobs []Job, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		if s.preexisting[j.ID] {
			continue
		}
		if prev, ok := s.jobs[j.ID]; ok && prev.Restarts > j.Restarts {
			j.Restarts = prev.Restarts
		}
		if _, ok := s.firstSeen[j.ID]; !ok {
			s.firstSeen[j.ID] = at
		}
		s.jobs[j.ID] = j
	}
}
