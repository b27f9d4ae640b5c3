//go:build integration

package operator

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/test/testenv"
)

// TestCRDRules: without sunk's webhook (a cluster that runs none, or while it is down), a real
// kube-apiserver's CRD rules alone refuse what they can, each naming the field. (The webhook's
// own refusals are table-tested in internal/validation; the controller repeats them as
// InvalidSpec.) One API server for both tables.
func TestCRDRules(t *testing.T) {
	env := testenv.APIEnv(t, testenv.APIOptions{CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")}})
	scheme := runtime.NewScheme()
	must(t, sunkv1.AddToScheme(scheme))
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	must(t, err)
	t.Run("topology per partition", func(t *testing.T) { crdRulesForTopologyPerPartition(t, c) })
	t.Run("login pools", func(t *testing.T) { crdRulesForLoginPools(t, c) })
}

// crdRulesForLoginPools: pools need the directory (sssdConfigSecretRef), a Group pool takes no
// home and a PerUser pool no replicas, no pool's name begins with another's and '-', and none
// is named so that its objects could take a login Service's name (pool user, user hosts).
func crdRulesForLoginPools(t *testing.T, c client.Client) {
	sssd := &corev1.LocalObjectReference{Name: "sssd"}
	for _, tc := range []struct {
		name  string
		sssd  *corev1.LocalObjectReference
		pools []sunkv1.LoginPool
		want  string // "" admits
	}{
		{name: "both types", sssd: sssd, pools: []sunkv1.LoginPool{{Name: "users", Group: "a"},
			{Name: "team", Type: sunkv1.LoginPoolGroup, Group: "a", Replicas: ptr.To(int32(2))}}},
		{name: "no directory", pools: []sunkv1.LoginPool{{Name: "users", Group: "a"}}, want: "pools need sssdConfigSecretRef"},
		{name: "a Group pool's home", sssd: sssd, pools: []sunkv1.LoginPool{{Name: "team", Type: sunkv1.LoginPoolGroup, Group: "a",
			Home: &sunkv1.StorageSpec{}}}, want: "home is per user"},
		{name: "a PerUser pool's replicas", sssd: sssd, pools: []sunkv1.LoginPool{{Name: "users", Group: "a", Replicas: ptr.To(int32(2))}},
			want: "replicas is a Group pool's"},
		{name: "names that meet", sssd: sssd, pools: []sunkv1.LoginPool{{Name: "users", Group: "a"},
			{Name: "users-x", Type: sunkv1.LoginPoolGroup, Group: "a"}}, want: "may not begin with another pool's name"},
		{name: "no group", sssd: sssd, pools: []sunkv1.LoginPool{{Name: "users"}}, want: "spec.login.pools[0].group"},
		{name: "a Service's name", sssd: sssd, pools: []sunkv1.LoginPool{{Name: "user", Group: "a"}}, want: "hosts, user and group may not name a pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pools"},
				Spec: sunkv1.SlurmClusterSpec{Image: "sunk.dev/slurm:26.05", Login: sunkv1.LoginSpec{SSSDConfigSecretRef: tc.sssd, Pools: tc.pools}}}
			expectAdmission(t, c, sc, tc.want)
		})
	}
}

// crdRulesForTopologyPerPartition: tree and block together and partitions' topologies are
// refused on Slurm 24.11, and a partition's topology that spec.topology does not define; 26.05
// admits them.
func crdRulesForTopologyPerPartition(t *testing.T, c client.Client) {
	tree := &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}
	block := &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique}
	for _, tc := range []struct {
		name    string
		version string
		topo    *sunkv1.TopologySpec
		parts   []sunkv1.PartitionSpec
		want    string // "" admits
	}{
		{name: "both on 26.05, a partition on each", version: "26.05", topo: &sunkv1.TopologySpec{Tree: tree, Block: block},
			parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "tree"}, {Name: "b", Topology: "block"}, {Name: "c"}}},
		{name: "both on 24.11", version: "24.11", topo: &sunkv1.TopologySpec{Tree: tree, Block: block},
			want: "spec.topology: Invalid value: \"object\": spec.topology: tree and block together need Slurm 25.05 or later"},
		{name: "both without slurmVersion (24.11)", topo: &sunkv1.TopologySpec{Tree: tree, Block: block}, want: "tree and block together need Slurm 25.05 or later"},
		{name: "neither", version: "26.05", topo: &sunkv1.TopologySpec{}, want: "spec.topology: Invalid value: \"object\": at least one of tree and block must be set"},
		{name: "a partition's topology on 24.11", version: "24.11", topo: &sunkv1.TopologySpec{Tree: tree},
			parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "tree"}}, want: "spec.partitions: Invalid value: \"object\": spec.partitions[].topology needs Slurm 25.05 or later"},
		{name: "a partition on a topology not defined", version: "26.05", topo: &sunkv1.TopologySpec{Tree: tree},
			parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "block"}}, want: "spec.partitions[].topology must name a topology spec.topology defines"},
		{name: "a partition's topology without spec.topology", version: "26.05",
			parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "tree"}}, want: "spec.partitions[].topology must name a topology spec.topology defines"},
		{name: "a partition's unknown topology", version: "26.05", topo: &sunkv1.TopologySpec{Tree: tree, Block: block},
			parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "nvlink"}}, want: `spec.partitions[0].topology: Unsupported value: "nvlink"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "topo"},
				Spec: sunkv1.SlurmClusterSpec{Image: "sunk.dev/slurm:26.05", SlurmVersion: tc.version, Topology: tc.topo, Partitions: tc.parts}}
			expectAdmission(t, c, sc, tc.want)
		})
	}
}

// expectAdmission creates sc as a dry run: want "" must be admitted, else refused with an error
// containing want.
func expectAdmission(t *testing.T, c client.Client, sc *sunkv1.SlurmCluster, want string) {
	t.Helper()
	err := c.Create(context.Background(), sc, client.DryRunAll)
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}
