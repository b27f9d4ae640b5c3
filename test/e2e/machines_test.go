//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// extraNodeTaint is the taint of the test bed's extra nodes (hack/kube-nodes.sh): pods that
// ask for several machines tolerate it.
var extraNodeTaint = corev1.Toleration{Key: "testbed.sunk.dev/extra-node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// TestSeveralMachines runs one Slurm cluster on the test bed's three real nodes (sunk-node and
// the two extra ones, each with its own kubelet, containerd and network namespace) through a
// PerNode NodeSet, and shows what only several machines show. Every disruption (drain, failure,
// leaving) is of sunk-node-3. Exclusive (not parallel): a machine's failure and return are a
// burst of work on two cores, and beside TestControllerFailover in the shared stage the returning
// primary slurmctld once lost the backup's job (Slurm's own "backup not completely done
// relinquishing control" under load).
//   - one slurmd per selected node, each pod on its own machine; a node labelled later gets its
//     member, and the nodes' topograph labels become Slurm's switches;
//   - `srun -N3` runs one task on each machine;
//   - `kubectl drain` of one node drains only its Slurm node and waits for its job;
//   - a machine failing for real (its link cut, every process of it killed): the Node goes
//     NotReady, its Slurm node is drained naming why and its job requeued as the job asked, the
//     other machines untouched; back up, the drain is lifted and the job runs again;
//   - a node leaving the selection loses its member only after its job.
func TestSeveralMachines(t *testing.T) {
	e := startOperator(t)
	ctx := context.Background()
	nodes := e.realNodes(t, 3)
	login, selector := e.machinesCluster(t, nodes, nodes[:2])
	member := func(node string) string { return clusternames.PerNodeMemberName("m", node) }

	// A node that joins the selection gets its member.
	e.setNodeLabel(t, nodes[2], selector, "member")
	e.waitIdle(t, login, 4*time.Minute, "the third machine's member idle", member(nodes[2]))
	e.checkOnePerMachine(t, nodes)
	e.checkSwitches(t, login, nodes)

	// One rank on each machine, wired up through PMI2 as an MPI library does at MPI_Init: each
	// rank sees every rank's host only if the key exchange crossed the three machines.
	for _, n := range nodes {
		e.copyPMI2Probe(t, member(n), "slurmd", "/tmp/pmi2probe")
	}
	out, err := e.sh(t, login, "login", testenv.AsUser("srun -N3 --ntasks-per-node=1 --mpi=pmi2 -D /tmp /tmp/pmi2probe 2>&1"))
	t.Logf("srun -N3 --mpi=pmi2 printed:\n%s", out)
	if err != nil {
		t.Fatalf("srun -N3 --mpi=pmi2: %v", err)
	}
	e.checkRanksOnEveryMachine(t, out, nodes, member)

	e.drainOneMachine(t, login, nodes, member)
	e.failOneMachine(t, login, nodes, member)

	// Leaving the selection: the member goes only after its job.
	job := e.sbatchHeld(t, login, "-w "+member(nodes[2])+" -J leaving")
	pod := e.memberPods(t, "m")[member(nodes[2])]
	e.setNodeLabel(t, nodes[2], selector, "")
	poll(t, 2*time.Minute, member(nodes[2])+" drained for leaving", func() error {
		state, err := e.slurmNodes(t, login)
		if err != nil {
			return err
		}
		if s := state[member(nodes[2])]; !drainingOrDrained(s) {
			return fmt.Errorf("%s is %q", member(nodes[2]), s)
		}
		return nil
	})
	var p corev1.Pod
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: pod.Name}, &p); err != nil || p.UID != pod.UID || !p.DeletionTimestamp.IsZero() {
		t.Fatalf("the leaving member's pod went (%v) while its job runs", err)
	}
	e.release(t, login, job)
	if state, exit, _ := e.jobEnd(t, login, job, time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the leaving member's job ended %s (%s)", state, exit)
	}
	poll(t, 2*time.Minute, member(nodes[2])+"'s pod and Slurm node gone", func() error {
		if _, ok := e.memberPods(t, "m")[member(nodes[2])]; ok {
			return fmt.Errorf("pod still there")
		}
		state, err := e.slurmNodes(t, login)
		if err != nil {
			return err
		}
		if s, ok := state[member(nodes[2])]; ok {
			return fmt.Errorf("Slurm node still there (%s)", s)
		}
		return nil
	})
}

// machinesCluster makes Slurm cluster mm with a PerNode NodeSet m over the nodes labelled with a
// label of the test's own (selector, removed from nodes when the test ends), labels first, and
// waits for their members idle. Slurm sets a lost machine's node DOWN after 30 s (SlurmdTimeout,
// production 300), and the nodes' topograph labels are its switches.
func (e *operatorEnv) machinesCluster(t testing.TB, nodes, first []string) (login, selector string) {
	t.Helper()
	selector = "e2e.sunk.dev/" + e.ns
	t.Cleanup(func() {
		for _, n := range nodes {
			e.setNodeLabel(t, n, selector, "")
		}
	})
	for _, n := range first {
		e.setNodeLabel(t, n, selector, "member")
	}
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "mm"},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever,
			Controller: sunkv1.ControllerSpec{ExtraConf: "SlurmdTimeout=30"},
			Topology:   &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetTopograph}}},
	})
	login = e.podOf(t, "mm", wellknown.ComponentLogin).Name
	if err := e.c.Create(context.Background(), &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "m"},
		Spec: sunkv1.NodeSetSpec{
			ClusterRef: "mm", Mode: sunkv1.NodeSetPerNode, NodeSelector: map[string]string{selector: "member"},
			Tolerations: []corev1.Toleration{extraNodeTaint}, Image: slurmImage,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("400Mi")}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	var members []string
	for _, n := range first {
		members = append(members, clusternames.PerNodeMemberName("m", n))
	}
	e.waitIdle(t, login, 4*time.Minute, "the members of the first machines idle", members...)
	return login, selector
}

// drainOneMachine: `kubectl drain` of one machine (the last of nodes) drains its Slurm node alone
// and ends only after the job on it.
func (e *operatorEnv) drainOneMachine(t *testing.T, login string, nodes []string, member func(string) string) {
	t.Helper()
	target := nodes[2]
	job := e.sbatchHeld(t, login, "-w "+member(target)+" -J drained")
	t.Cleanup(func() { e.uncordonNode(t, target) })
	drain := exec.Command(filepath.Join(testenv.CacheDir(), "bin", "kubectl"), "drain", target,
		"--pod-selector", wellknown.LabelCluster+"=mm", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4m")
	drain.Env = append(drain.Environ(), "KUBECONFIG="+e.Kubeconfig)
	var out strings.Builder
	drain.Stdout, drain.Stderr = &out, &out
	if err := drain.Start(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- drain.Wait() }()
	poll(t, 2*time.Minute, member(target)+" draining", func() error {
		state, err := e.slurmNodes(t, login)
		if err != nil {
			return err
		}
		if s := state[member(target)]; !drainingOrDrained(s) {
			return fmt.Errorf("%s is %q", member(target), s)
		}
		for _, n := range nodes[:2] {
			if s := state[member(n)]; s != "idle" {
				return fmt.Errorf("%s is %q: only %s's node may drain", member(n), s, target)
			}
		}
		return nil
	})
	select {
	case err := <-drained:
		t.Fatalf("kubectl drain ended (%v) while the job runs:\n%s", err, out.String())
	default:
	}
	e.release(t, login, job)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("kubectl drain: %v\n%s", err, out.String())
		}
	case <-time.After(4 * time.Minute):
		_ = drain.Process.Kill()
		t.Fatalf("kubectl drain did not end:\n%s", out.String())
	}
	if state, exit, _ := e.jobEnd(t, login, job, time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the drained machine's job ended %s (%s)", state, exit)
	}
	e.uncordonNode(t, target)
	e.waitIdle(t, login, 4*time.Minute, member(target)+" idle after the uncordon", member(target))
}

// failOneMachine cuts a machine's power (the last of nodes; hack/env-kube.sh node-fail) while a
// requeueable job runs on it, and boots it again.
func (e *operatorEnv) failOneMachine(t testing.TB, login string, nodes []string, member func(string) string) (notReady, drained time.Duration) {
	t.Helper()
	target := nodes[2]
	job := e.sbatchHeld(t, login, "-w "+member(target)+" --requeue -J lost")
	t.Cleanup(func() { envKube(t, "node-restore", target) })
	start := time.Now()
	envKube(t, "node-fail", target)
	poll(t, 3*time.Minute, target+" NotReady", func() error {
		var n corev1.Node
		if err := e.c.Get(context.Background(), types.NamespacedName{Name: target}, &n); err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("still Ready")
	})
	notReady = time.Since(start)
	poll(t, 2*time.Minute, member(target)+" drained naming the node NotReady", func() error {
		out, err := e.sh(t, login, "login", "scontrol show node "+member(target)+" | grep -o 'Reason=.*'")
		if err != nil || !strings.Contains(out, "NotReady") {
			return fmt.Errorf("%v %q", err, out)
		}
		return nil
	})
	drained = time.Since(start)
	poll(t, 2*time.Minute, "job "+job+" requeued", func() error {
		out, err := e.sh(t, login, "login", "scontrol show job "+job+" | grep -oE 'JobState=[A-Z_]+|Restarts=[0-9]+' | paste -sd' '")
		if err != nil || !strings.Contains(out, "Restarts=1") {
			return fmt.Errorf("%v %q", err, out)
		}
		return nil
	})
	state, err := e.slurmNodes(t, login)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		if s := state[member(n)]; s != "idle" {
			t.Errorf("%s is %q while %s is lost: only the lost machine's node may change", member(n), s, target)
		}
	}
	t.Logf("bench: name=machine-failure not_ready_s=%.1f slurm_drained_s=%.1f", notReady.Seconds(), drained.Seconds())

	// A requeued job begins again only once its old launch's credential expired (cred_expire,
	// 120 s; docs/scheduler.md): moved to now, as an admin may, instead of waiting.
	if out, err := e.sh(t, login, "login", "scontrol update jobid="+job+" StartTime=now"); err != nil {
		t.Fatalf("scontrol update StartTime=now: %v %s", err, out)
	}
	envKube(t, "node-restore", target)
	e.waitIdleOrRunning(t, login, member(target))
	poll(t, 3*time.Minute, "job "+job+" running again", func() error {
		out, err := e.sh(t, login, "login", "squeue -h -j "+job+" -o %T")
		if err != nil || strings.TrimSpace(out) != "RUNNING" {
			return fmt.Errorf("%v %q", err, out)
		}
		return nil
	})
	e.release(t, login, job)
	if state, exit, _ := e.jobEnd(t, login, job, time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the requeued job ended %s (%s)", state, exit)
	}
	return notReady, drained
}

// checkRanksOnEveryMachine: pmi2probe's lines of a 3-rank step, one rank on each machine's
// member, every rank seeing the same three hosts (ranks are not placed in node-name order).
func (e *operatorEnv) checkRanksOnEveryMachine(t *testing.T, out string, nodes []string, member func(string) string) {
	t.Helper()
	hostsSeen := map[string]bool{}
	var lists []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rank, size int
		var host, hosts string
		if _, err := fmt.Sscanf(line, "pmi2probe: rank=%d size=%d host=%s hosts=%s", &rank, &size, &host, &hosts); err != nil || size != len(nodes) {
			t.Fatalf("line %q of the step is not a rank's of %d: %v", line, len(nodes), err)
		}
		hostsSeen[host] = true
		lists = append(lists, hosts)
	}
	for _, n := range nodes {
		if !hostsSeen[member(n)] {
			t.Errorf("no rank on %s (hosts %v)", member(n), hostsSeen)
		}
	}
	for _, l := range lists {
		if l != lists[0] || len(strings.Split(l, ",")) != len(nodes) {
			t.Errorf("ranks saw different hosts: %v", lists)
		}
	}
}

// drainingOrDrained says whether sinfo's short state (%t) is a drain: "drng" while a job runs,
// "drain" after.
func drainingOrDrained(state string) bool {
	return state == "drng" || strings.HasPrefix(state, "drain")
}

// waitIdleOrRunning waits until a Slurm node takes jobs again: no drain, not down.
func (e *operatorEnv) waitIdleOrRunning(t testing.TB, login, node string) {
	t.Helper()
	poll(t, 4*time.Minute, node+" back in service", func() error {
		state, err := e.slurmNodes(t, login)
		if err != nil {
			return err
		}
		// sinfo's short states (%t): the requeued job may start on it before this looks.
		if s := state[node]; s != "idle" && s != "alloc" && s != "mix" {
			return fmt.Errorf("%s is %q", node, s)
		}
		return nil
	})
}

// realNodes are the test bed's nodes with a kubelet (not kwok's), sunk-node first; the test
// needs at least want of them.
func (e *operatorEnv) realNodes(t testing.TB, want int) []string {
	t.Helper()
	names := e.nodeNames(t, func(n *corev1.Node) bool { return n.Labels["type"] != "kwok" })
	if len(names) < want {
		t.Fatalf("the test bed has %d real nodes (%v), the test needs %d: start it with SUNK_KUBE_NODES=%d ", len(names), names, want, want)
	}
	return names[:want]
}

// nodeNames are the names of the nodes keep takes, sorted.
func (e *operatorEnv) nodeNames(t testing.TB, keep func(*corev1.Node) bool) []string {
	t.Helper()
	var list corev1.NodeList
	if err := e.c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range list.Items {
		if keep(&list.Items[i]) {
			names = append(names, list.Items[i].Name)
		}
	}
	sort.Strings(names)
	return names
}

// setNodeLabel sets (value "" removes) a label of a node.
func (e *operatorEnv) setNodeLabel(t testing.TB, node, key, value string) {
	t.Helper()
	var v any
	if value != "" {
		v = value
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
	if err := e.c.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("label %s %s=%s: %v", node, key, value, err)
	}
}

func (e *operatorEnv) uncordonNode(t testing.TB, node string) {
	t.Helper()
	patch := []byte(`{"spec":{"unschedulable":null}}`)
	if err := e.c.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("uncordon %s: %v", node, err)
	}
}

// checkOnePerMachine: each machine runs exactly one member, the one named after it.
func (e *operatorEnv) checkOnePerMachine(t *testing.T, nodes []string) {
	t.Helper()
	pods := e.memberPods(t, "m")
	if len(pods) != len(nodes) {
		t.Fatalf("%d members, want one on each of %v", len(pods), nodes)
	}
	for _, n := range nodes {
		p, ok := pods[clusternames.PerNodeMemberName("m", n)]
		if !ok || p.Spec.NodeName != n {
			t.Errorf("member of %s: %v on %q", n, ok, p.Spec.NodeName)
		}
	}
}

// checkSwitches: each machine's topograph leaf label is its member's leaf switch in Slurm's
// topology (hack/kube-nodes.sh: sunk-node on leaf-0, the extra nodes two a leaf). The leaves
// are read from `scontrol show topology` with their hostlists expanded (26.05 takes a topology
// name, not a node, as its argument).
func (e *operatorEnv) checkSwitches(t *testing.T, login string, nodes []string) {
	t.Helper()
	want := map[string]string{}
	for _, n := range nodes {
		var node corev1.Node
		if err := e.c.Get(context.Background(), types.NamespacedName{Name: n}, &node); err != nil {
			t.Fatal(err)
		}
		leaf := node.Labels[wellknown.TreePresetLabels["topograph"][2]]
		if leaf == "" {
			t.Fatalf("node %s has no topograph leaf label (labels %v)", n, node.Labels)
		}
		want[clusternames.PerNodeMemberName("m", n)] = leaf
	}
	const leaves = `scontrol show topology | grep 'Level=0' | sed -E 's/^SwitchName=([^ ]+) .* Nodes=([^ ]+).*/\1 \2/' |
  while read -r sw list; do for n in $(scontrol show hostnames "$list"); do echo "$n $sw"; done; done`
	poll(t, 2*time.Minute, "every member under its machine's leaf switch", func() error {
		out, err := e.sh(t, login, "login", leaves)
		if err != nil {
			return fmt.Errorf("%v %q", err, out)
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				got[f[0]] = f[1]
			}
		}
		for m, leaf := range want {
			if !strings.HasPrefix(got[m], leaf) {
				return fmt.Errorf("%s under %q, want %s (leaves %v)", m, got[m], leaf, got)
			}
		}
		return nil
	})
}

// envKube runs hack/env-kube.sh with args (node-fail, node-restore).
func envKube(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "env-kube.sh"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("env-kube.sh %v: %v\n%s", args, err, out)
	}
}
