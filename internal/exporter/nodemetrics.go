package exporter

// Nodes: the one state each is counted under, its CPUs, memory and GPUs, and their metrics.

import (
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"sunk.dev/sunk/pkg/slurm"
)

// NodeState is the one state a node is counted under: drained or draining for a node with
// the DRAIN flag (draining while it still runs jobs), fail and maint for those flags,
// completing while jobs finish, else Slurm's base state in lower case (idle, mixed,
// allocated, down, future, ...).
func NodeState(n *slurm.Node) string {
	switch {
	case n.Drained() && n.Busy():
		return "draining"
	case n.Drained():
		return "drained"
	case n.HasState("FAIL"):
		return "fail"
	case n.HasState("MAINTENANCE"):
		return "maint"
	case n.HasState("COMPLETING"):
		return "completing"
	case n.BaseState() == "":
		return "unknown"
	}
	return strings.ToLower(n.BaseState())
}

// takesJobs reports a node state in which Slurm may start jobs on the node's free resources.
func takesJobs(state string) bool {
	switch state {
	case "idle", "mixed", "allocated", "completing":
		return true
	}
	return false
}

// GPUs counts the GPUs of a GRES string as Slurm 24.11 reports it: "gpu:4",
// "gpu:a100:2(S:0-1),gpu:h100:2", "gpu:a100:1(IDX:0),shard:a100:0(0/8,0/8)". A gpu entry
// without a count is one GPU; other GRES are not counted.
func GPUs(gres string) int {
	total := 0
	for _, e := range slurm.GresEntries(gres) {
		f := strings.Split(e, ":")
		if strings.TrimPrefix(f[0], "gres/") != "gpu" {
			continue
		}
		if len(f) == 1 {
			total++
			continue
		}
		if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
			total += n
		} else if len(f) == 2 { // "gpu:a100": a type, one GPU
			total++
		}
	}
	return total
}

const mib = 1 << 20

type resources struct{ cpus, cpusAlloc, cpusIdle, mem, memAlloc, memIdle, gpus, gpusAlloc, gpusIdle float64 }

func (r *resources) add(o resources) {
	r.cpus += o.cpus
	r.cpusAlloc += o.cpusAlloc
	r.cpusIdle += o.cpusIdle
	r.mem += o.mem
	r.memAlloc += o.memAlloc
	r.memIdle += o.memIdle
	r.gpus += o.gpus
	r.gpusAlloc += o.gpusAlloc
	r.gpusIdle += o.gpusIdle
}

func nodeResources(n *slurm.Node, state string) resources {
	r := resources{
		cpus: float64(n.CPUs), cpusAlloc: float64(n.AllocCPUs),
		mem: float64(n.RealMemoryMB) * mib, memAlloc: float64(n.AllocMemoryMB) * mib,
		gpus: float64(GPUs(n.Gres)), gpusAlloc: float64(GPUs(n.GresUsed)),
	}
	if takesJobs(state) {
		r.cpusIdle = max(r.cpus-r.cpusAlloc, 0)
		r.memIdle = max(r.mem-r.memAlloc, 0)
		r.gpusIdle = max(r.gpus-r.gpusAlloc, 0)
	}
	return r
}

type pair struct{ a, b string }

func nodeMetrics(cluster string, nodes []slurm.Node, pods map[string]PodInfo) []prometheus.Metric {
	cl := label(cluster)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var out []prometheus.Metric
	byState := map[string]float64{}
	byPartState := map[pair]float64{}
	byPart := map[string]*resources{}
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		name := label(n.Name)
		state := NodeState(n)
		r := nodeResources(n, state)
		byState[state]++
		parts := make([]string, 0, len(n.Partitions))
		for _, p := range n.Partitions {
			p = label(p)
			parts = append(parts, p)
			byPartState[pair{p, state}]++
			if byPart[p] == nil {
				byPart[p] = &resources{}
			}
			byPart[p].add(r)
		}
		if seen[name] {
			continue // two names that come out the same: counted above, one series of its own
		}
		seen[name] = true
		pod := pods[n.Name]
		out = append(out,
			gauge(descNodeInfo, 1, cl, name, state, label(strings.Join(n.State, ",")), strings.Join(parts, ","),
				label(n.Reason), label(pod.NodeSet), label(pod.KubeNode)),
			gauge(descNodeCPUs, r.cpus, cl, name), gauge(descNodeCPUsAlloc, r.cpusAlloc, cl, name), gauge(descNodeCPUsIdle, r.cpusIdle, cl, name),
			gauge(descNodeMemory, r.mem, cl, name), gauge(descNodeMemoryAlloc, r.memAlloc, cl, name), gauge(descNodeMemoryIdle, r.memIdle, cl, name),
			gauge(descNodeGPUs, r.gpus, cl, name), gauge(descNodeGPUsAlloc, r.gpusAlloc, cl, name), gauge(descNodeGPUsIdle, r.gpusIdle, cl, name),
		)
	}
	for s, v := range byState {
		out = append(out, gauge(descNodes, v, cl, s))
	}
	for k, v := range byPartState {
		out = append(out, gauge(descPartitionNodes, v, cl, k.a, k.b))
	}
	for p, r := range byPart {
		out = append(out,
			gauge(descPartCPUs, r.cpus, cl, p), gauge(descPartCPUsAlloc, r.cpusAlloc, cl, p), gauge(descPartCPUsIdle, r.cpusIdle, cl, p),
			gauge(descPartMemory, r.mem, cl, p), gauge(descPartMemoryAlloc, r.memAlloc, cl, p), gauge(descPartMemoryIdle, r.memIdle, cl, p),
			gauge(descPartGPUs, r.gpus, cl, p), gauge(descPartGPUsAlloc, r.gpusAlloc, cl, p), gauge(descPartGPUsIdle, r.gpusIdle, cl, p),
		)
	}
	return out
}
