package clusternames

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurmconf"
)

// A compute pod is one dynamic Slurm node: its slurmd registers under the pod's name, with the
// node line render writes into the pod (EnvSlurmdConf). The operator names the pods; the
// syncer tells sunk's nodes from the ones a person registered, and reads back what a pod
// asked Slurm for, by the rules below.

// MaxSlurmNodeName is the longest pod and Slurm node name: a host name is a DNS label.
const MaxSlurmNodeName = 63

// SlurmdContainer is the compute pod's slurmd container, which carries EnvSlurmdConf.
const SlurmdContainer = "slurmd"

// EnvSlurmdConf is the compute pod's variable with its node line (render.SlurmdConf), which
// sunk's image passes to slurmd -Z --conf.
const EnvSlurmdConf = "SLURMD_CONF"

// PerNodeMemberName is the member name of a NodeSet on a Kubernetes node: <nodeset>-<node>
// as a DNS label (dots and other characters become dashes). A name that would be longer than
// a host name may be is cut and ends with a hash of the node name, so it stays unique.
func PerNodeMemberName(nodeSet, node string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(node) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := nodeSet + "-" + strings.Trim(b.String(), "-")
	if len(name) <= MaxSlurmNodeName {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(name[:MaxSlurmNodeName-len(suffix)], "-") + suffix
}

// OrdinalMemberName is the name of member i of a NodeSet in Replicas mode.
func OrdinalMemberName(nodeSet string, i int) string { return fmt.Sprintf("%s-%d", nodeSet, i) }

// MemberOrdinal parses a name made by OrdinalMemberName; false for any other name.
func MemberOrdinal(nodeSet, name string) (int, bool) {
	s, ok := strings.CutPrefix(name, nodeSet+"-")
	if !ok {
		return 0, false
	}
	// Atoi also reads "01" and "+1": only the name OrdinalMemberName makes counts.
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || OrdinalMemberName(nodeSet, i) != name {
		return 0, false
	}
	return i, true
}

// NodeFeatures are the Slurm features of every node of the NodeSet: its name, then
// spec.features.
func NodeFeatures(ns *sunkv1.NodeSet) []string {
	return append([]string{ns.Name}, ns.Spec.Features...)
}

// RegisteredByNodeSet says whether a Slurm node of this name, with these features, is a
// NodeSet's compute pod: its pod registers as <nodeset>-<suffix> (PerNodeMemberName,
// OrdinalMemberName) with the NodeSet's name among its features (NodeFeatures). A dynamic
// node a person or another tool registered has no such pair, and the syncer leaves its record
// alone.
func RegisteredByNodeSet(name string, features []string) bool {
	return RegisteringNodeSet(name, features) != ""
}

// RegisteringNodeSet is the NodeSet whose compute pod registered a Slurm node of this name,
// with these features, by the rule of RegisteredByNodeSet; "" for none. Of several features
// that prefix the name it is the longest: "gpu-a-0" with features gpu-a and gpu is NodeSet
// gpu-a's. A NodeSet whose spec.features prefix its own member names longer than its name
// does has its records read as that feature's; whoever acts on a record by this answer
// therefore leaves it alone rather than touching another NodeSet's.
func RegisteringNodeSet(name string, features []string) string {
	var owner string
	for _, f := range features {
		if f != "" && len(f) > len(owner) && len(name) > len(f)+1 && strings.HasPrefix(name, f+"-") {
			owner = f
		}
	}
	return owner
}

// RegisteredGres is the Gres= of the node line a compute pod's slurmd registers with: read
// back from the pod (its slurmd container's EnvSlurmdConf, which render.SlurmdConf wrote), so
// that it is what this pod asked Slurm for, not what the NodeSet would render today. "" when
// the line has no Gres; ok is false when the pod has no such line (not a pod sunk rendered).
func RegisteredGres(pod *corev1.Pod) (gres string, ok bool) {
	return registeredField(pod, "gres")
}

// RegisteredTopology is the Topology= a compute pod's slurmd registers with, read back from
// its EnvSlurmdConf (the last Topology key wins, as extraConf's replaces sunk's); "" when it
// has none.
func RegisteredTopology(pod *corev1.Pod) string {
	str, _ := registeredField(pod, "topology")
	return str
}

// registeredField is key's value on the node line of a compute pod's slurmd (EnvSlurmdConf):
// "" when the line lacks it; ok is false when the pod has no such line.
func registeredField(pod *corev1.Pod, key string) (value string, ok bool) {
	for _, c := range pod.Spec.Containers {
		if c.Name != SlurmdContainer {
			continue
		}
		for _, e := range c.Env {
			if e.Name != EnvSlurmdConf {
				continue
			}
			// A later key wins (Value), as extraConf's replaces sunk's.
			line, _ := slurmconf.Parse(e.Value)
			value, _ = line.Value(key)
			return value, true
		}
	}
	return "", false
}
