//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// memberPods returns the live pods of a NodeSet by name.
func (e *operatorEnv) memberPods(t testing.TB, nodeSet string) map[string]corev1.Pod {
	var pods corev1.PodList
	if err := e.c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.Namespace == e.ns && p.Labels[wellknown.LabelNodeSet] == nodeSet && p.DeletionTimestamp.IsZero() {
			out[p.Name] = p
		}
	}
	return out
}

// createReplicas creates a Replicas NodeSet of n small slurmd pods (100m CPU, 400Mi) in cluster.
func (e *operatorEnv) createReplicas(t testing.TB, cluster, name string, n int32) *sunkv1.NodeSet {
	t.Helper()
	return e.createReplicasWith(t, cluster, name, n, func(*sunkv1.NodeSetSpec) {})
}

// createReplicasWith is createReplicas with the spec changed by with before it is created.
func (e *operatorEnv) createReplicasWith(t testing.TB, cluster, name string, n int32, with func(*sunkv1.NodeSetSpec)) *sunkv1.NodeSet {
	t.Helper()
	ns := &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: sunkv1.NodeSetSpec{
			ClusterRef: cluster, Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(n), Image: slurmImage,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("400Mi")}},
		},
	}
	with(&ns.Spec)
	if err := e.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// slurmNodes is `sinfo -N` as node → state, read in the login pod.
func (e *operatorEnv) slurmNodes(t testing.TB, login string) (map[string]string, error) {
	out, err := e.sh(t, login, "login", "sinfo -h -N -o '%N %t'")
	if err != nil {
		return nil, err
	}
	nodes := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			nodes[f[0]] = f[1]
		}
	}
	return nodes, nil
}

// waitIdle waits until sinfo in the login pod shows every one of nodes idle; what names the
// wait in a failure ("cpu-0 idle", "… again after the uncordon").
func (e *operatorEnv) waitIdle(t testing.TB, login string, timeout time.Duration, what string, nodes ...string) {
	t.Helper()
	poll(t, timeout, what, func() error {
		got, err := e.slurmNodes(t, login)
		if err != nil {
			return fmt.Errorf("sinfo: %v", err)
		}
		for _, n := range nodes {
			if got[n] != "idle" {
				return fmt.Errorf("sinfo: %v", got)
			}
		}
		return nil
	})
}

// waitSacct waits until the sacct command, run in the login pod, prints want.
func (e *operatorEnv) waitSacct(t testing.TB, login, sacct, want string) {
	t.Helper()
	poll(t, 3*time.Minute, "sacct shows "+want, func() error {
		out, err := e.sh(t, login, "login", sacct)
		if err != nil || !strings.Contains(out, want) {
			return fmt.Errorf("%s: %v %q", sacct, err, out)
		}
		return nil
	})
}

// jobEnd waits until a job finished and returns its state, exit code and end time.
func (e *operatorEnv) jobEnd(t testing.TB, login, id string, timeout time.Duration) (state, exit string, end time.Time) {
	t.Helper()
	poll(t, timeout, "job "+id+" finished", func() error {
		out, err := e.sh(t, login, "login", "scontrol -o show job "+id)
		if err != nil {
			return err
		}
		field := func(k string) string {
			m := regexp.MustCompile(`\b` + k + `=(\S+)`).FindStringSubmatch(out)
			if m == nil {
				return ""
			}
			return m[1]
		}
		state, exit = field("JobState"), field("ExitCode")
		if state == "RUNNING" || state == "PENDING" || state == "COMPLETING" || state == "CONFIGURING" {
			return fmt.Errorf("job %s is %s", id, state)
		}
		var perr error
		end, perr = time.ParseInLocation("2006-01-02T15:04:05", field("EndTime"), time.UTC)
		return perr
	})
	return state, exit, end
}

// sbatch submits a job as nobody (testenv.AsUser) and waits until it runs.
func (e *operatorEnv) sbatch(t testing.TB, login, args string) string {
	t.Helper()
	out, err := e.sh(t, login, "login", testenv.AsUser("sbatch --parsable "+args))
	if err != nil {
		t.Fatalf("sbatch %s: %v\n%s", args, err, out)
	}
	id := strings.TrimSpace(out)
	poll(t, 3*time.Minute, "job "+id+" running", func() error {
		out, err := e.sh(t, login, "login", "squeue -h -j "+id+" -o '%T %r'")
		if err != nil || !strings.HasPrefix(out, "RUNNING") {
			return fmt.Errorf("squeue: %v %q", err, out)
		}
		return nil
	})
	return id
}

// heldScript is the batch script of a job that runs until release: SIGUSR1 to its batch shell
// ends it COMPLETED (exit 0). A test whose job must outlive a step (a drain, a takeover, a rolling
// update) ends the job once it has checked that step, instead of guessing with a sleep how long
// the step takes on a loaded machine: jobs of `sleep 40` ended before the step they were to
// outlive when three clusters started beside them on 2 cores.
const heldScript = `trap "exit 0" USR1; sleep 3600 & wait`

// sbatchHeld submits a held job (heldScript) with args and waits until it runs. The job is
// cancelled when the test ends: a test that fails before it releases its job would otherwise
// wait for ever on the namespace's deletion, whose compute pods drain first.
func (e *operatorEnv) sbatchHeld(t testing.TB, login, args string) string {
	t.Helper()
	id := e.sbatch(t, login, args+" --wrap '"+heldScript+"'")
	t.Cleanup(func() { _, _ = e.sh(t, login, "login", "scancel "+id) })
	return id
}

// release ends a held job: its batch shell gets SIGUSR1 and exits 0.
func (e *operatorEnv) release(t testing.TB, login, id string) {
	t.Helper()
	if out, err := e.sh(t, login, "login", "scancel --batch --signal=USR1 "+id); err != nil {
		t.Fatalf("scancel --batch --signal=USR1 %s: %v\n%s", id, err, out)
	}
}

// cancel cancels a job, asking again while slurmctld does not answer: a key rotation round or
// an upgrade reconfigures it, and a command sent meanwhile times out (Slurm's clients do not
// retry a request that may have been carried out). A job already ending counts as cancelled.
func (e *operatorEnv) cancel(t testing.TB, login, id string) {
	t.Helper()
	poll(t, 2*time.Minute, "scancel "+id, func() error {
		out, err := e.sh(t, login, "login", "scancel "+id)
		if err == nil {
			return nil
		}
		switch said := out + err.Error(); {
		case strings.Contains(said, "already completing or completed"):
			return nil
		case strings.Contains(said, "Socket timed out"), strings.Contains(said, "Unable to contact slurm controller"):
			return fmt.Errorf("slurmctld did not answer: %v\n%s", err, out)
		}
		t.Fatalf("scancel %s: %v\n%s", id, err, out)
		return nil
	})
}

// TestNodeSetReplicasNeverKillAJob runs a NodeSet of 3 real slurmd pods: they register
// as IDLE nodes and run a 3-node step; a rolling update replaces the idle nodes first and
// the busy one only after its job completed; scaling 3 → 1 waits for a job the same way
// and then removes the Slurm records. An autoscaled NodeSet then grows and shrinks with the
// queue on the same cluster (autoscaledNodeSet).
func TestNodeSetReplicasNeverKillAJob(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "nsc"},
		Spec:       sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever},
	})
	login := e.podOf(t, "nsc", wellknown.ComponentLogin).Name

	start := time.Now()
	ns := e.createReplicas(t, "nsc", "cpu", 3)
	names := []string{"cpu-0", "cpu-1", "cpu-2"}
	allIdle := func(want []string) func() error {
		return func() error {
			nodes, err := e.slurmNodes(t, login)
			if err != nil {
				return err
			}
			var got []string
			for n, st := range nodes {
				if st == "idle" {
					got = append(got, n)
				}
			}
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(want) || len(nodes) != len(want) {
				return fmt.Errorf("sinfo nodes %v, want exactly %v idle", nodes, want)
			}
			return nil
		}
	}
	poll(t, 4*time.Minute, "3 idle nodes", allIdle(names))
	t.Logf("NodeSet creation → 3 IDLE Slurm nodes: %s", time.Since(start).Round(time.Second))

	out, err := e.sh(t, login, "login", testenv.AsUser("srun -N3 hostname | sort"))
	if err != nil || strings.Fields(out) == nil || strings.Join(strings.Fields(out), " ") != strings.Join(names, " ") {
		t.Fatalf("srun -N3 hostname: %v\n%s", err, out)
	}

	// The busy node must be the only busy one: srun's job can stay
	// COMPLETING on a node for a while (its epilog answer is late), and a
	// completing node is rightly replaced after the busy one.
	poll(t, 2*time.Minute, "3 idle nodes after srun", allIdle(names))

	// Rolling update with a job on cpu-1: the idle pods are replaced, the busy one waits for
	// its job.
	job := e.sbatchHeld(t, login, "-w cpu-1 -J busy")
	before := e.memberPods(t, "cpu")
	e.update(t, ns, func() { ns.Spec.Env = []corev1.EnvVar{{Name: "E2E_REVISION", Value: "2"}} })
	replaced := map[string]time.Time{}
	replacedUntil := func(want int) func() error {
		return func() error {
			now := e.memberPods(t, "cpu")
			for _, n := range names {
				if p, ok := now[n]; ok && p.UID != before[n].UID {
					if _, seen := replaced[n]; !seen {
						replaced[n] = p.CreationTimestamp.Time
					}
				}
			}
			if len(replaced) < want {
				return fmt.Errorf("replaced so far: %v", replaced)
			}
			return nil
		}
	}
	poll(t, 5*time.Minute, "the two idle pods replaced", replacedUntil(2))
	if _, early := replaced["cpu-1"]; early {
		t.Fatalf("the busy pod cpu-1 was replaced while its job ran: %v", replaced)
	}
	if out, err := e.sh(t, login, "login", "squeue -h -j "+job+" -o %T"); err != nil || strings.TrimSpace(out) != "RUNNING" {
		t.Fatalf("the job is %q (%v) while the update waits for it, want RUNNING", out, err)
	}
	e.release(t, login, job)
	poll(t, 3*time.Minute, "the busy pod replaced after its job", replacedUntil(3))
	state, exit, end := e.jobEnd(t, login, job, time.Minute)
	if state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the busy node's job ended %s with exit %s: the update killed it", state, exit)
	}
	if !replaced["cpu-1"].After(replaced["cpu-0"]) || !replaced["cpu-1"].After(replaced["cpu-2"]) {
		t.Errorf("the busy node was not replaced last: %v", replaced)
	}
	if replaced["cpu-1"].Before(end.Add(-time.Second)) {
		t.Errorf("cpu-1 was replaced at %v, before its job ended at %v", replaced["cpu-1"], end)
	}
	poll(t, 3*time.Minute, "3 idle nodes after the update", allIdle(names))

	// Scale 3 → 1 with a job on cpu-2: the idle cpu-1 goes, cpu-2 waits for its job.
	job = e.sbatchHeld(t, login, "-w cpu-2 -J busy2")
	busyPod := e.memberPods(t, "cpu")["cpu-2"]
	e.update(t, ns, func() { ns.Spec.Replicas = ptr.To(int32(1)) })
	poll(t, 3*time.Minute, "the idle cpu-1 gone", func() error {
		if _, ok := e.memberPods(t, "cpu")["cpu-1"]; ok {
			return fmt.Errorf("cpu-1 still there")
		}
		return nil
	})
	if p, ok := e.memberPods(t, "cpu")["cpu-2"]; !ok || p.UID != busyPod.UID {
		t.Fatalf("the busy pod cpu-2 went while its job ran")
	}
	e.release(t, login, job)
	var podGone time.Time
	poll(t, 3*time.Minute, "cpu-2 pod gone after its job", func() error {
		var p corev1.Pod
		err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "cpu-2"}, &p)
		if err == nil && p.UID == busyPod.UID {
			return fmt.Errorf("cpu-2 still there")
		}
		podGone = time.Now()
		return nil
	})
	state, exit, end = e.jobEnd(t, login, job, time.Minute)
	if state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the job on the scaled-in node ended %s with exit %s", state, exit)
	}
	if podGone.Before(end) {
		t.Errorf("cpu-2 was deleted at %v, before its job ended at %v", podGone, end)
	}
	poll(t, 2*time.Minute, "only cpu-0 left in Slurm", allIdle([]string{"cpu-0"}))
	t.Logf("busy pod deleted → its Slurm record removed: %s", time.Since(podGone).Round(time.Second))

	e.autoscaledNodeSet(t, "nsc", login)
}
