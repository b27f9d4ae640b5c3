// The config hash: which rendering of a SlurmCluster's configuration a file, a pod or the
// status names. render writes it on slurm.conf's first line; the operator reads that line in
// slurmctld's pod to know kubelet has delivered the rendering, and names the hash on the pod
// (wellknown.AnnotationConfigHash) and in status.configHash.

package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// ConfigHashLine is the prefix of slurm.conf's first line that carries the config hash.
const ConfigHashLine = "sunk-config-hash: "

// slurmConfHeader is slurm.conf's first line, which names the hash so that anyone (the
// operator included) can tell which rendering a pod sees.
func slurmConfHeader(namespace, cluster, hash string) string {
	return fmt.Sprintf("# Rendered by sunk for SlurmCluster %s/%s. %s%s\n", namespace, cluster, ConfigHashLine, hash)
}

// ConfigHashCommand is what the operator runs in slurmctld's container (ControllerContainer)
// to read the first line of the slurm.conf kubelet has delivered there. It is the only command
// the sunk chart's ValidatingAdmissionPolicy lets the operator exec, in that container only.
func ConfigHashCommand() []string { return []string{"head", "-n1", ConfigDir + "/slurm.conf"} }

// HashInSlurmConf returns the config hash that a slurm.conf's first line names.
func HashInSlurmConf(slurmConf string) string {
	first, _, _ := strings.Cut(slurmConf, "\n")
	_, h, ok := strings.Cut(first, ConfigHashLine)
	if !ok {
		return ""
	}
	return strings.TrimSpace(h)
}

// hashOf is a short hash of the contents of two maps of texts: of a rendering's files and
// scripts, the config hash.
func hashOf(a, b map[string]string) string {
	h := sha256.New()
	for _, m := range []map[string]string{a, b} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s\x00%d\x00%s\x00", k, len(m[k]), m[k])
		}
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// HashStrings is the short content hash sunk uses in annotations.
func HashStrings(parts ...string) string {
	m := map[string]string{}
	for i, p := range parts {
		m[fmt.Sprint(i)] = p
	}
	return hashOf(m, nil)
}
