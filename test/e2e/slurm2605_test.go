//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// slurmImage2605 is Slurm 26.05 from Debian sid (hack/images.sh), the operator's image of
// 26.05 in these tests (localImages).
const slurmImage2605 = "sunk.dev/slurm:26.05-local"

// sinfoSays2605: `sinfo --version` of a 26.05 release ("slurm-wlm 26.05.5" from Debian's
// packages, "slurm 26.05.x" from SchedMD's).
func sinfoSays2605(out string) bool {
	return regexp.MustCompile(`^slurm(-wlm)? 26\.05\.`).MatchString(strings.TrimSpace(out))
}

// TestSlurm2605Cluster runs a SlurmCluster with managed accounting and the node watcher on the
// 26.05 image: every role of sunk-entrypoint (slurmctld, slurmdbd, mariadb, slurmrestd, sackd,
// login, slurmd) starts on it, the operator and the syncer speak its REST API, the login pod's
// clients and the compute node report 26.05, and a job runs and shows in sacct, all under the
// cluster's NetworkPolicies, which keep a pod of another namespace from its daemons.
func TestSlurm2605Cluster(t *testing.T) {
	parallel(t) // its own namespace and cluster: nothing of the shared node
	e := startOperator(t)
	ctx := context.Background()
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "s26"},
		Spec: sunkv1.SlurmClusterSpec{
			SlurmVersion:    sunkv1.SlurmVersion2605, // no image: the operator's 26.05 image
			ImagePullPolicy: corev1.PullNever,
			Accounting:      sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged},
			// The node watcher is one of the daemons the NetworkPolicies guard.
			Controller: sunkv1.ControllerSpec{NodeWatcher: true},
			Partitions: []sunkv1.PartitionSpec{{Name: "main", Default: true}},
		},
	}
	e.createReady(t, sc)
	login := e.podOf(t, "s26", wellknown.ComponentLogin).Name
	out, err := e.sh(t, login, "login", "sinfo --version")
	if err != nil || !sinfoSays2605(out) {
		t.Fatalf("sinfo --version in the login pod: %v %q", err, out)
	}
	t.Logf("login pod: %s", strings.TrimSpace(out))

	if err := e.c.Create(ctx, &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "compute"},
		Spec:       sunkv1.NodeSetSpec{ClusterRef: "s26", Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(1))},
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll(t, 3*time.Minute, "compute node idle", func() error {
		out, err := e.sh(t, login, "login", "sinfo -h -N -o '%N %t'")
		if err != nil || !strings.Contains(out, "compute-0 idle") {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	t.Logf("compute-0 idle %s after the NodeSet was created", time.Since(start).Round(time.Second))
	out, err = e.sh(t, login, "login", "scontrol show node compute-0")
	if err != nil || !regexp.MustCompile(`Version=26\.05`).MatchString(out) {
		t.Fatalf("scontrol show node compute-0: %v\n%s", err, out)
	}

	out, err = e.sh(t, login, "login", testenv.AsUser(`srun -N1 -J e2e-2605 sh -c 'echo job=$SLURM_JOB_ID'`))
	m := regexp.MustCompile(`job=(\d+)`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("srun: %v\n%s", err, out)
	}
	poll(t, 2*time.Minute, "job in sacct", func() error {
		out, err := e.sh(t, login, "login", "sacct -n -X -P -j "+m[1]+" -o JobID,JobName,State,ExitCode")
		if err != nil || !strings.Contains(out, m[1]+"|e2e-2605|COMPLETED|0:0") {
			return fmt.Errorf("sacct: %v %q", err, out)
		}
		return nil
	})
	e.daemonsOnlyTheClusterReaches(t, "s26", login)
	// The syncer reads the nodes through slurmrestd (v0.0.45 on 26.05) and the node watcher;
	// the status names the release, and 26.05 lacks nothing.
	poll(t, time.Minute, "NodesSynced, SlurmVersion 26.05", func() error {
		conds := e.cluster(t, "s26").Status.Conditions
		c := meta.FindStatusCondition(conds, sunkv1.ConditionNodesSynced)
		v := meta.FindStatusCondition(conds, sunkv1.ConditionSlurmVersion)
		f := meta.FindStatusCondition(conds, sunkv1.ConditionFeaturesAvailable)
		if c == nil || c.Status != metav1.ConditionTrue || v == nil || v.Message != "26.05" || v.Status != metav1.ConditionTrue ||
			f == nil || f.Status != metav1.ConditionTrue {
			return fmt.Errorf("NodesSynced = %+v, SlurmVersion = %+v, FeaturesAvailable = %+v", c, v, f)
		}
		return nil
	})
}
