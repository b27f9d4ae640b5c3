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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// TestUpgrade2411To2605 upgrades a running 24.11 cluster with managed accounting by raising
// spec.slurmVersion: a job running across the upgrade ends COMPLETED, the daemons move in
// Slurm's order (slurmdbd, slurmctld, then the compute node, replaced only once idle), the node
// comes back on 26.05, and sacct still lists the jobs from before.
func TestUpgrade2411To2605(t *testing.T) {
	parallel(t) // its own namespace and cluster: nothing of the shared node
	e := startOperator(t)
	ctx := context.Background()
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "up"},
		Spec: sunkv1.SlurmClusterSpec{
			SlurmVersion:    sunkv1.SlurmVersion2411, // no image: the operator's of each release
			ImagePullPolicy: corev1.PullNever,
			Accounting:      sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged},
			Partitions:      []sunkv1.PartitionSpec{{Name: "main", Default: true}},
		},
	}
	e.createReady(t, sc)
	if err := e.c.Create(ctx, &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "compute"},
		// Containers: plugstack.conf then requires the release's SPANK plugin, so every srun
		// below, before and after the upgrade, proves that image's plugin loads in srun and
		// slurmstepd (TestContainersForJobs runs containers on 26.05 only).
		Spec: sunkv1.NodeSetSpec{ClusterRef: "up", Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(1)),
			Containers: &sunkv1.NodeSetContainers{Enabled: true}},
	}); err != nil {
		t.Fatal(err)
	}
	// login runs a command in whichever login pod runs now (the upgrade replaces it).
	login := func(cmd string) (string, error) {
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(e.ns), client.MatchingLabels{wellknown.LabelCluster: "up", wellknown.LabelComponent: wellknown.ComponentLogin}); err != nil {
			return "", err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning {
				return e.sh(t, p.Name, "login", cmd)
			}
		}
		return "", fmt.Errorf("no running login pod")
	}
	poll(t, 3*time.Minute, "compute-0 idle on 24.11", func() error {
		out, err := login("sinfo -h -N -o '%N %t %v'")
		if err != nil || !strings.Contains(out, "compute-0 idle 24.11") {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	if out, err := login("srun --help"); err != nil || !strings.Contains(out, "--container-image") {
		t.Errorf("srun --help on 24.11 does not offer the container plugin's --container-image: %v\n%s", err, out)
	}
	out, err := login(testenv.AsUser(`srun -J before-upgrade sh -c 'echo job=$SLURM_JOB_ID'`))
	m := regexp.MustCompile(`job=(\d+)`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("srun: %v\n%s", err, out)
	}
	before := m[1]
	out, err = login(testenv.AsUser("sbatch --parsable -J across-upgrade --wrap '" + heldScript + "'"))
	running := strings.TrimSpace(out)
	if err != nil || !regexp.MustCompile(`^\d+$`).MatchString(running) {
		t.Fatalf("sbatch: %v %q", err, out)
	}
	poll(t, time.Minute, "the job running", func() error {
		out, err := login("squeue -h -j " + running + " -o %T")
		if err != nil || strings.TrimSpace(out) != "RUNNING" {
			return fmt.Errorf("squeue: %v %q", err, out)
		}
		return nil
	})

	start := time.Now()
	e.update(t, sc, func() { sc.Spec.SlurmVersion = sunkv1.SlurmVersion2605 })
	// Each daemon's first start on 26.05, as its pod's release label shows; on2605 records them
	// and says which of the components have none yet.
	moved := map[string]time.Duration{}
	on2605 := func(components ...string) error {
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(e.ns), client.MatchingLabels{wellknown.LabelCluster: "up"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			c := p.Labels[wellknown.LabelComponent]
			if p.Labels[wellknown.LabelSlurmVersion] == sunkv1.SlurmVersion2605 && p.Status.Phase == corev1.PodRunning {
				if _, ok := moved[c]; !ok {
					moved[c] = time.Since(start)
					t.Logf("%s: a pod on 26.05 runs %s after the spec change (%s)", c, moved[c].Round(time.Second), p.Name)
				}
			}
		}
		for _, c := range components {
			if _, ok := moved[c]; !ok {
				return fmt.Errorf("%s not on 26.05 yet", c)
			}
		}
		return nil
	}
	// The job runs on while slurmdbd and slurmctld move; the compute node waits for it. Released
	// once slurmctld runs 26.05, it ends, and the node follows.
	poll(t, 8*time.Minute, "slurmdbd and slurmctld on 26.05, the job running", func() error {
		if err := on2605(wellknown.ComponentDatabase, wellknown.ComponentAccounting, wellknown.ComponentController); err != nil {
			return err
		}
		if out, err := login("squeue -h -j " + running + " -o %T"); err != nil || strings.TrimSpace(out) != "RUNNING" {
			return fmt.Errorf("squeue: %v %q", err, out)
		}
		return nil
	})
	if _, ok := moved[wellknown.ComponentCompute]; ok {
		t.Fatalf("the compute pod moved to 26.05 while a job ran on it")
	}
	if out, err := login("scancel --batch --signal=USR1 " + running); err != nil {
		t.Fatalf("releasing job %s: %v\n%s", running, err, out)
	}
	poll(t, 8*time.Minute, "every pod on 26.05 and the job COMPLETED", func() error {
		if err := on2605(wellknown.ComponentDatabase, wellknown.ComponentAccounting, wellknown.ComponentController,
			wellknown.ComponentRestAPI, wellknown.ComponentLogin, wellknown.ComponentCompute); err != nil {
			return err
		}
		out, err := login("sinfo -h -N -o '%N %t %v'")
		if err != nil || !strings.Contains(out, "compute-0 idle 26.05") {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	t.Logf("upgrade done (compute-0 idle on 26.05) %s after the spec change", time.Since(start).Round(time.Second))
	// Slurm's order: slurmdbd before slurmctld before the compute node.
	if !(moved[wellknown.ComponentAccounting] <= moved[wellknown.ComponentController] && moved[wellknown.ComponentController] <= moved[wellknown.ComponentCompute]) {
		t.Errorf("out of order: slurmdbd %s, slurmctld %s, compute %s", moved[wellknown.ComponentAccounting], moved[wellknown.ComponentController], moved[wellknown.ComponentCompute])
	}
	if v, err := login("sinfo --version"); err != nil || !sinfoSays2605(v) {
		t.Errorf("sinfo --version in the login pod: %v %q", err, v)
	}
	// sinfo shows the version the dynamic node was created with; scontrol's Version= line comes
	// with slurmd's full registration a moment later (seen: BootTime=None and no Version line).
	poll(t, time.Minute, "scontrol show node compute-0 on 26.05", func() error {
		if out, err := login("scontrol show node compute-0"); err != nil || !strings.Contains(out, "Version=26.05") {
			return fmt.Errorf("scontrol show node compute-0: %v\n%s", err, out)
		}
		return nil
	})
	poll(t, 2*time.Minute, "both jobs in sacct, COMPLETED", func() error {
		out, err := login("sacct -n -X -P -j " + before + "," + running + " -o JobID,JobName,State")
		if err != nil || !strings.Contains(out, before+"|before-upgrade|COMPLETED") || !strings.Contains(out, running+"|across-upgrade|COMPLETED") {
			return fmt.Errorf("sacct: %v %q", err, out)
		}
		return nil
	})
	poll(t, time.Minute, "SlurmVersion condition 26.05", func() error {
		var got sunkv1.SlurmCluster
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "up"}, &got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, sunkv1.ConditionSlurmVersion)
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != "26.05" {
			return fmt.Errorf("SlurmVersion = %+v", c)
		}
		return nil
	})
}
