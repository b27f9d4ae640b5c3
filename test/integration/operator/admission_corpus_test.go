//go:build integration

package operator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/validation"
)

// The string fields of both custom resources, as the API server admits them (CRD schema, CEL
// and sunk's webhook together), against a corpus of bad values. Each field is of one kind:
//
//   - name: a name, pattern or path-like value, where every corpus value is bad;
//   - conf: Slurm config lines, where '#' starts a comment and "Key = Value" is Slurm's own
//     syntax, so that only the other values are bad, plus every key sunk keeps;
//   - params: the parameters of one rendered line (a partition's, a node's).
//
// Fields left out, and why: scripts (jobSubmitLua, prolog/epilog inline, s6 run) are free
// text checked as scripts (TestAdmissionRejectsBadSpecsNamingTheField, internal/validation);
// references to Secrets and ConfigMaps are only looked up by name, never written into a
// file; Kubernetes' own types (resources, sidecars, volumes, tolerations, affinity, env
// values, node selectors) are Kubernetes' to validate.
type fieldKind int

const (
	kindName fieldKind = iota
	kindConf
	kindParams
	kindPath // a file path: non-ASCII and '#' are fine, control characters and 10 KB are not
)

// badValues are bad in every field of every kind.
var badValues = map[string]string{
	"newline injecting a key": "x\nAuthType=auth/none",
	"carriage return":         "x\rAuthType=auth/none",
	"NUL":                     "x\x00y",
	"10 KB":                   strings.Repeat("a", 10<<10),
	"escaped comment":         `x\# AuthType=auth/none`,
	"line separator":          "x\u2028AuthType=auth/none",
}

// badNames are bad in names (and in line parameters, except where noted) but Slurm syntax in
// config lines.
var badNames = map[string]string{
	"comment":                 "gpu#x",
	"spaced equals":           "a = b",
	"empty key":               "=x",
	"shell characters":        "x;reboot",
	"greek capital alpha":     "gpu\u0391",
	"cyrillic a":              "\u0430ll",
	"fullwidth equals":        "AuthType\uff1dauth/none",
	"tab and key":             "x\tAuthType=auth/none",
	"space and key":           "x AuthType=auth/none",
	"non-breaking space, key": "x\u00a0AuthType=auth/none",
}

// crField is one string field of a SlurmCluster (setCluster) or a NodeSet (setNodeSet).
type crField struct {
	path       string
	kind       fieldKind
	setCluster func(*sunkv1.SlurmCluster, string)
	setNodeSet func(*sunkv1.NodeSet, string)
}

func clusterField(path string, kind fieldKind, set func(*sunkv1.SlurmCluster, string)) crField {
	return crField{path: path, kind: kind, setCluster: set}
}

func nodeSetField(path string, kind fieldKind, set func(*sunkv1.NodeSet, string)) crField {
	return crField{path: path, kind: kind, setNodeSet: set}
}

func external(host, user, db string) *sunkv1.ExternalDatabase {
	return &sunkv1.ExternalDatabase{Host: host, User: user, Database: db,
		PasswordSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "pw"}, Key: "password"}}
}

var corpusFields = []crField{
	clusterField("spec.image", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Image = sunkv1.Image(v) }),
	clusterField("spec.controller.image", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Controller.Image = sunkv1.Image(v) }),
	clusterField("spec.restApi.image", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.RestAPI.Image = sunkv1.Image(v) }),
	clusterField("spec.accounting.image", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Accounting.Image = sunkv1.Image(v) }),
	clusterField("spec.login.image", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Login.Image = sunkv1.Image(v) }),
	clusterField("spec.clusterName", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.ClusterName = v }),
	clusterField("spec.controller.extraConf", kindConf, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Controller.ExtraConf = "MinJobAge=" + v }),
	clusterField("spec.controller.unsafeConfKeys[0]", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Controller.UnsafeConfKeys = []string{v} }),
	clusterField("spec.controller.stateStorage.storageClassName", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Controller.StateStorage.StorageClassName = &v }),
	clusterField("spec.accounting.databaseStorage.storageClassName", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Accounting.DatabaseStorage.StorageClassName = &v }),
	clusterField("spec.cgroupConf", kindConf, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.CgroupConf = "ConstrainCores=" + v }),
	clusterField("spec.partitions[0].name", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Partitions[0].Name = v }),
	clusterField("spec.partitions[0].nodeSets[0]", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Partitions[0].NodeSets = []string{v} }),
	clusterField("spec.partitions[0].maxTime", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Partitions[0].MaxTime = v }),
	clusterField("spec.partitions[0].topology", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Partitions[0].Topology = sunkv1.TopologyName(v) }),
	clusterField("spec.partitions[0].extraConf", kindParams, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Partitions[0].ExtraConf = "MaxNodes=" + v }),
	clusterField("spec.preemption.exemptTime", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.Preemption = sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio, ExemptTime: v}
	}),
	clusterField("spec.prolog[0].name", kindName, func(sc *sunkv1.SlurmCluster, v string) { sc.Spec.Prolog[0].Name = v }),
	clusterField("spec.accounting.external.host", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.Accounting = sunkv1.AccountingSpec{Mode: sunkv1.AccountingExternal, External: external(v, "slurm", "")}
	}),
	clusterField("spec.accounting.external.user", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.Accounting = sunkv1.AccountingSpec{Mode: sunkv1.AccountingExternal, External: external("db", v, "")}
	}),
	clusterField("spec.accounting.external.database", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.Accounting = sunkv1.AccountingSpec{Mode: sunkv1.AccountingExternal, External: external("db", "slurm", v)}
	}),
	clusterField("spec.login.services[0].name", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.Login.Services = []sunkv1.S6Service{{Name: v, Run: "#!/bin/sh\n"}}
	}),
	clusterField("spec.sharedVolumes[0].name", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SharedVolumes = []sunkv1.SharedVolume{{Name: v, ClaimName: "home", MountPath: "/home"}}
	}),
	clusterField("spec.sharedVolumes[0].claimName", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SharedVolumes = []sunkv1.SharedVolume{{Name: "home", ClaimName: v, MountPath: "/home"}}
	}),
	clusterField("spec.sharedVolumes[0].mountPath", kindPath, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SharedVolumes = []sunkv1.SharedVolume{{Name: "home", ClaimName: "home", MountPath: "/" + v}}
	}),
	clusterField("spec.schedulerPolicy.tenants[0].name", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SchedulerPolicy.Tenants = []sunkv1.SchedulerTenant{{Name: v, Namespaces: []string{"a"}}}
	}),
	clusterField("spec.schedulerPolicy.tenants[0].namespaces[0]", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SchedulerPolicy.Tenants = []sunkv1.SchedulerTenant{{Name: "t", Namespaces: []string{v}}}
	}),
	clusterField("spec.schedulerPolicy.tenants[0].partitions[0]", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SchedulerPolicy.Tenants = []sunkv1.SchedulerTenant{{Name: "t", Namespaces: []string{"a"}, Partitions: []string{v}}}
	}),
	clusterField("spec.schedulerPolicy.tenants[0].accounts[0]", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SchedulerPolicy.Tenants = []sunkv1.SchedulerTenant{{Name: "t", Namespaces: []string{"a"}, Accounts: []string{v}}}
	}),
	clusterField("spec.schedulerPolicy.tenants[0].defaultAccount", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SchedulerPolicy.Tenants = []sunkv1.SchedulerTenant{{Name: "t", Namespaces: []string{"a"}, Accounts: []string{"*"}, DefaultAccount: v}}
	}),
	clusterField("spec.schedulerPolicy.tenants[0].qos[0]", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SchedulerPolicy.Tenants = []sunkv1.SchedulerTenant{{Name: "t", Namespaces: []string{"a"}, QOS: []string{v}}}
	}),
	clusterField("spec.schedulerPolicy.tenants[0].reservations[0]", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.SchedulerPolicy.Tenants = []sunkv1.SchedulerTenant{{Name: "t", Namespaces: []string{"a"}, Reservations: []string{v}}}
	}),
	clusterField("spec.topology.tree.labelKeys[1]", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.Topology = &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{"example.com/spine", v}}}
	}),
	clusterField("spec.topology.block.labelKey", kindName, func(sc *sunkv1.SlurmCluster, v string) {
		sc.Spec.Topology = &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{LabelKey: v}}
	}),

	nodeSetField("spec.clusterRef", kindName, func(ns *sunkv1.NodeSet, v string) { ns.Spec.ClusterRef = v }),
	nodeSetField("spec.image", kindName, func(ns *sunkv1.NodeSet, v string) { ns.Spec.Image = sunkv1.Image(v) }),
	nodeSetField("spec.features[0]", kindName, func(ns *sunkv1.NodeSet, v string) { ns.Spec.Features = []string{v} }),
	nodeSetField("spec.gpuType", kindName, func(ns *sunkv1.NodeSet, v string) { ns.Spec.GPUType = v }),
	nodeSetField("spec.extraConf", kindParams, func(ns *sunkv1.NodeSet, v string) { ns.Spec.ExtraConf = "TmpDisk=" + v }),
	nodeSetField("spec.env[0].name", kindName, func(ns *sunkv1.NodeSet, v string) { ns.Spec.Env = []corev1.EnvVar{{Name: v, Value: "1"}} }),
	nodeSetField("spec.services[0].name", kindName, func(ns *sunkv1.NodeSet, v string) {
		ns.Spec.Services = []sunkv1.S6Service{{Name: v, Run: "#!/bin/sh\n"}}
	}),
}

// corpusFor is what must be refused in a field of the kind.
func corpusFor(f crField) map[string]string {
	out := map[string]string{}
	for k, v := range badValues {
		out[k] = v
	}
	switch f.kind {
	case kindName:
		for k, v := range badNames {
			out[k] = v
		}
	case kindParams:
		// One line: a second key is the line's own parameter, not an injection, and '#' is a
		// comment; look-alikes and other whitespace are still refused.
		for _, k := range []string{"greek capital alpha", "cyrillic a", "fullwidth equals", "non-breaking space, key"} {
			out[k] = badNames[k]
		}
		out["a top-level key"] = "1 AuthType=auth/none"
	case kindConf:
		for _, k := range []string{"greek capital alpha", "cyrillic a", "fullwidth equals", "non-breaking space, key"} {
			out[k] = badNames[k]
		}
		if f.path == "spec.controller.extraConf" {
			for key := range validation.DeniedSlurmConfKeys() {
				out["denied "+key] = "1\n" + key + "=x"
				out["denied "+key+", spaced and upper case"] = "1 " + strings.ToUpper(key) + " = x"
			}
		}
		out["unknown key"] = "1\nBogusKey=1"
	case kindPath:
		out = map[string]string{"newline": "x\ny", "carriage return": "x\ry", "NUL": "x\x00y", "10 KB": strings.Repeat("a", 10<<10)}
	}
	return out
}

// TestAdmissionCorpusEveryStringField: through the API server (schema, CEL and webhook), each
// bad value in each string field is refused, and the refusal names the field.
func TestAdmissionCorpusEveryStringField(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	// The base objects are admitted: a refusal is the bad value's.
	if err := h.c.Create(ctx, corpusCluster(h.ns, "base")); err != nil {
		t.Fatalf("base SlurmCluster: %v", err)
	}
	if err := h.c.Create(ctx, newNodeSet(h.ns, "base", "c")); err != nil {
		t.Fatalf("base NodeSet: %v", err)
	}
	n := 0
	for _, f := range corpusFields {
		values := corpusFor(f)
		names := make([]string, 0, len(values))
		for k := range values {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			v := values[name]
			n++
			var err error
			if f.setNodeSet != nil {
				ns := newNodeSet(h.ns, fmt.Sprintf("bad%d", n), "c")
				f.setNodeSet(ns, v)
				err = h.c.Create(ctx, ns)
			} else {
				sc := corpusCluster(h.ns, fmt.Sprintf("bad%d", n))
				f.setCluster(sc, v)
				err = h.c.Create(ctx, sc)
			}
			if err == nil {
				t.Errorf("%s = %s (%q) admitted", f.path, name, trunc(v))
				continue
			}
			if !strings.Contains(err.Error(), f.path) {
				t.Errorf("%s = %s (%q): the refusal does not name the field: %v", f.path, name, trunc(v), trunc(err.Error()))
			}
		}
	}
	t.Logf("%d bad values refused in %d fields", n, len(corpusFields))

	// An update that brings a bad value is refused just the same, and the object keeps its
	// spec: bad input loses nothing.
	for _, f := range corpusFields {
		v := badValues["newline injecting a key"]
		var before, after any
		// Retried on a conflict: the operator writes finalizers and status meanwhile.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if f.setNodeSet != nil {
				ns := h.nodeSet(t, "base")
				before = *ns.Spec.DeepCopy()
				f.setNodeSet(ns, v)
				return h.c.Update(ctx, ns)
			}
			sc := h.cluster(t, "base")
			before = *sc.Spec.DeepCopy()
			f.setCluster(sc, v)
			return h.c.Update(ctx, sc)
		})
		if f.setNodeSet != nil {
			after = h.nodeSet(t, "base").Spec
		} else {
			after = h.cluster(t, "base").Spec
		}
		if err == nil || !strings.Contains(err.Error(), f.path) {
			t.Errorf("update of %s with a newline: %v", f.path, err)
		}
		if !equality.Semantic.DeepEqual(before, after) {
			t.Errorf("update of %s with a newline changed the spec", f.path)
		}
	}
}

// corpusCluster is a SlurmCluster every field of corpusFields can be set on.
func corpusCluster(ns, name string) *sunkv1.SlurmCluster {
	sc := newCluster(ns, name)
	sc.Spec.Partitions = []sunkv1.PartitionSpec{{Name: "batch", MaxTime: "60", PriorityTier: ptr.To[int32](1)}}
	return sc
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
