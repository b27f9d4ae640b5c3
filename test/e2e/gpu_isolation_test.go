//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// fakeGPUs is how many fake GPUs the test's node advertises and its compute pod holds.
const fakeGPUs = 2

// fakeGPUDevices makes /dev/nvidia0.. (n of them) as character devices of NVIDIA's major (195)
// in the compute pod, before slurmd starts: gres.conf names them (File=), and slurmd refuses a
// GPU whose file does not exist. No driver answers them, so an open that the device cgroup
// lets through fails with ENXIO ("No such device or address"), and one it refuses with EPERM
// ("Operation not permitted"): the two tell a job's device rights apart without a GPU.
func fakeGPUDevices(n int) string {
	return fmt.Sprintf(`#!/bin/sh
set -eu
i=0
while [ $i -lt %d ]; do
  rm -f /dev/nvidia$i
  mknod -m 0666 /dev/nvidia$i c 195 $i
  i=$((i+1))
done
`, n)
}

// openAll is a job's view of the fake GPUs and the keys, one line each: "DEVICE: RESULT".
const openAll = `echo "gpus: ${SLURM_JOB_GPUS:-none}"
for d in /dev/nvidia0 /dev/nvidia1; do
  if err=$(head -c1 "$d" 2>&1 >/dev/null); then echo "$d: opened"; else echo "$d: ${err##*: }"; fi
done
for k in /etc/sunk/keys/slurm.key; do
  if [ -e "$k" ] && ! head -c1 "$k" >/dev/null 2>&1; then echo "$k: unreadable"; else echo "$k: READABLE OR MISSING"; fi
done
echo "readable keys: $(` + keyFiles + ` | tr '\n' ' ')"
`

// TestJobSeesOnlyItsGPUs: a PerNode NodeSet with GPUs on the machine's one node waits until
// slurmctld runs the gres.conf that includes its pods' device lines, and its node then
// registers its two (fake) GPUs, not drained (issue 18). With ConstrainDevices=yes (the
// default cgroup.conf), a job opens the GPU it was allocated and is refused the other by the
// device cgroup; a job without GPUs is refused both; neither reads slurm.key (issue 21, docs/security.md); and
// accounting records the GPU job's gres/gpu TRES, typed too (issue 18). The node advertises
// nvidia.com/gpu for the test's duration. Then the NodeSet autoscales and shares the machine's
// GPUs with an ordinary pod, one world at a time: it gives the machine back and takes it back
// (onePoolOfGPUs).
func TestJobSeesOnlyItsGPUs(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	e.advertiseGPUs(t, fakeGPUs)
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gpu"},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever,
			Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged}},
	})
	gpus := resource.MustParse(fmt.Sprint(fakeGPUs))
	// Above ordinary pods': the compute pod takes its machine back from them (onePoolOfGPUs).
	priority := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-slurm"}, Value: 1000,
		Description: "sunk e2e: compute pods above ordinary pods"}
	if err := e.c.Create(context.Background(), priority); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), priority) })
	ns := &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gpu"},
		Spec: sunkv1.NodeSetSpec{
			ClusterRef: "gpu", Mode: sunkv1.NodeSetPerNode, NodeSelector: map[string]string{corev1.LabelHostname: e.NodeName},
			Image: slurmImage, GPUType: "fake",
			PriorityClassName: priority.Name,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("400Mi")},
				Limits:   corev1.ResourceList{wellknown.ResourceGPU: gpus},
			},
			Services: []sunkv1.S6Service{{Name: "fake-gpus", Type: sunkv1.S6Oneshot, Run: fakeGPUDevices(fakeGPUs)}},
		},
	}
	if err := e.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	login := e.podOf(t, "gpu", wellknown.ComponentLogin).Name
	// The pod waits until slurmctld runs the gres.conf that includes the pods' device lines
	// (its condition GPUDevicesIncluded): a slurmd that registered before would report no GPUs, and
	// slurmctld would drain its node for good ("gres/gpu count reported lower than
	// configured"). The NodeSet says so with an event while it waits; until the cluster reports
	// the Include, no compute pod exists (pods read first: the cluster's flag only turns true
	// here). On a loaded machine the cluster may report the Include before the NodeSet's first
	// reconcile, which then has nothing to wait for (no event): the order of the pod's creation
	// and the condition's transition shows the wait either way.
	waited := false
	poll(t, 2*time.Minute, "NodeSet event "+sunkv1.ReasonWaitingForGPUConfig+" or the device Include", func() error {
		var events eventsv1.EventList
		if err := e.c.List(context.Background(), &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for _, ev := range events.Items {
			if ev.Regarding.Kind == "NodeSet" && ev.Regarding.Name == "gpu" && ev.Reason == sunkv1.ReasonWaitingForGPUConfig {
				waited = true
				return nil
			}
		}
		if meta.IsStatusConditionTrue(e.cluster(t, "gpu").Status.Conditions, sunkv1.ConditionGPUDevicesIncluded) {
			return nil
		}
		return fmt.Errorf("neither among %d events nor the condition", len(events.Items))
	})
	var pods corev1.PodList
	if err := e.c.List(context.Background(), &pods, client.InNamespace(e.ns), client.MatchingLabels{wellknown.LabelComponent: wellknown.ComponentCompute}); err != nil {
		t.Fatal(err)
	}
	included := meta.FindStatusCondition(e.cluster(t, "gpu").Status.Conditions, sunkv1.ConditionGPUDevicesIncluded)
	for _, p := range pods.Items {
		// Whole seconds both: a pod of the same second as the transition counts as after it.
		if included == nil || included.Status != metav1.ConditionTrue || p.CreationTimestamp.Before(&included.LastTransitionTime) {
			t.Fatalf("compute pod %s (created %s) exists before slurmctld runs the device Include (%+v)", p.Name, p.CreationTimestamp, included)
		}
	}
	t.Logf("the NodeSet said it waited for the device Include: %v", waited)
	member := clusternames.PerNodeMemberName("gpu", e.NodeName)
	e.waitIdle(t, login, 4*time.Minute, member+" idle", member)
	computePod := e.podOf(t, "gpu", wellknown.ComponentCompute)
	compute := computePod.Name
	t.Logf("pod %s created %s after its NodeSet: the wait for the device Include", compute,
		computePod.CreationTimestamp.Sub(ns.CreationTimestamp.Time))

	// Not vacuous: slurmd registered the two GPUs with their files, and outside any job the
	// devices open as far as a driverless device can (ENXIO, not EPERM).
	if got := e.mustSh(t, login, "login", "scontrol -o show node "+member); !strings.Contains(got, "Gres=gpu:fake:2") {
		t.Fatalf("%s does not have its two GPUs: %s", member, got)
	}
	for _, d := range []string{"/dev/nvidia0", "/dev/nvidia1"} {
		out, _ := e.sh(t, compute, "slurmd", "head -c1 "+d+" 2>&1")
		if !strings.Contains(out, "No such device or address") {
			t.Fatalf("outside a job, %s: %q, want ENXIO (the fake device, not a cgroup refusal)", d, out)
		}
	}

	run := func(gres string) (string, map[string]string) {
		t.Helper()
		id := e.mustSh(t, login, "login", testenv.AsUser(`sbatch --parsable --chdir=/tmp --output=/tmp/gpu-%j.out `)+gres+` --wrap '`+strings.ReplaceAll(openAll, "'", `'\''`)+`'`)
		if state, exit, _ := e.jobEnd(t, login, id, 3*time.Minute); state != "COMPLETED" {
			t.Fatalf("job %s (%s): %s (exit %s)", id, gres, state, exit)
		}
		out := e.mustSh(t, compute, "slurmd", "cat /tmp/gpu-"+id+".out")
		t.Logf("job %s (%s):\n%s", id, gres, out)
		got := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(l, ": "); ok {
				got[k] = strings.TrimSpace(v)
			}
		}
		return id, got
	}
	const allowed, refused = "No such device or address", "Operation not permitted"

	oneID, one := run("--gres=gpu:1")
	if !regexp.MustCompile(`^[01]$`).MatchString(one["gpus"]) {
		t.Fatalf("a job with --gres=gpu:1 was given GPUs %q", one["gpus"])
	}
	mine, other := "/dev/nvidia"+one["gpus"], "/dev/nvidia"+map[string]string{"0": "1", "1": "0"}[one["gpus"]]
	if one[mine] != allowed {
		t.Errorf("its own GPU %s: %q, want %q", mine, one[mine], allowed)
	}
	if one[other] != refused {
		t.Errorf("the other GPU %s: %q, want %q (the device cgroup's refusal)", other, one[other], refused)
	}
	_, none := run("")
	for _, d := range []string{"/dev/nvidia0", "/dev/nvidia1"} {
		if none[d] != refused {
			t.Errorf("a job without GPUs, %s: %q, want %q", d, none[d], refused)
		}
	}
	for _, got := range []map[string]string{one, none} {
		// slurmd reads the key from the Secret's volume (no copy elsewhere since the key ring);
		// keyFiles below looks for any other readable one.
		for _, k := range []string{"/etc/sunk/keys/slurm.key"} {
			if got[k] != "unreadable" {
				t.Errorf("a job and %s: %q, want unreadable", k, got[k])
			}
		}
		if got["readable keys"] != "" {
			t.Errorf("key files a job can read: %s", got["readable keys"])
		}
	}
	// Accounting (AccountingStorageTRES=gres/gpu,gres/gpu:fake): the GPU job's allocation is
	// recorded as GPUs, of any type and of its type.
	poll(t, 2*time.Minute, "job "+oneID+"'s GPUs in sacct", func() error {
		out, err := e.sh(t, login, "login", "sacct -n -X -P -j "+oneID+" -o AllocTRES")
		if err != nil || !strings.Contains(out, "gres/gpu=1") || !strings.Contains(out, "gres/gpu:fake=1") {
			return fmt.Errorf("sacct AllocTRES: %v %q", err, out)
		}
		t.Logf("job %s AllocTRES: %s", oneID, strings.TrimSpace(out))
		return nil
	})

	e.onePoolOfGPUs(t, login, member)
}

// advertiseGPUs makes the node offer n nvidia.com/gpu (an extended resource with no device
// plugin, which kubelet admits as a count) until the test ends.
func (e *operatorEnv) advertiseGPUs(t *testing.T, n int) {
	t.Helper()
	set := func(v any) error {
		q := map[string]any{string(wellknown.ResourceGPU): v}
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"capacity": q, "allocatable": q}})
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.NodeName}}
		return e.c.Status().Patch(context.Background(), node, client.RawPatch(types.MergePatchType, patch))
	}
	if err := set(fmt.Sprint(n)); err != nil {
		t.Fatalf("advertising %d GPUs: %v", n, err)
	}
	t.Cleanup(func() {
		if err := set(nil); err != nil {
			t.Errorf("removing the fake GPUs from node %s: %v", e.NodeName, err)
		}
	})
}
