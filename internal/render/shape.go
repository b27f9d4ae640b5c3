package render

import (
	"strconv"
	"strings"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurmconf"
)

// NodeShape is what every node of a NodeSet registers with Slurm, read back from the node line
// its pods' slurmd get (SlurmdConf, spec.extraConf's keys included), so that the autoscaler can
// tell whether a pending job would fit a node before it starts one.
type NodeShape struct {
	// CPUs and MemoryMB (RealMemory) are 0 when the line does not state them: slurmd then
	// registers the machine's.
	CPUs, MemoryMB int64
	// GPUs is the count of the line's gpu GRES; -1 when its Gres cannot be read.
	GPUs     int64
	Features []string
	Weight   int64
}

// ShapeOf is the NodeShape of the NodeSet's nodes.
func ShapeOf(ns *sunkv1.NodeSet) NodeShape {
	line, _ := slurmconf.Parse(SlurmdConf(ns, "")) // admission refuses extraConf it cannot read
	number := func(key string) int64 {
		v, _ := line.Value(key)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	shape := NodeShape{CPUs: number("CPUs"), MemoryMB: number("RealMemory"), Weight: number("Weight")}
	if f, _ := line.Value("Features"); f != "" {
		shape.Features = strings.Split(f, ",")
	}
	gres, _ := line.Value("Gres")
	shape.GPUs = GPUsOf(gres)
	return shape
}

// GPUsOf counts the gpu GRES of a Gres string (a node line's "gpu:a100:2", a job's tres_per_node
// "gres/gpu:2"); -1 when it cannot be read.
func GPUsOf(gres string) int64 {
	var entries []string
	for _, e := range slurm.GresEntries(gres) {
		entries = append(entries, strings.TrimPrefix(e, "gres/"))
	}
	counts, err := slurm.ParseGres(strings.Join(entries, ","))
	if err != nil {
		return -1
	}
	var n int64
	for k, c := range counts {
		if name, _, _ := strings.Cut(k, ":"); name == "gpu" {
			n += c
		}
	}
	return n
}
