//go:build integration

package operator

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// TestTopologyStrMovesOnRealSlurm: on Slurm 26.05 the operator moves a relabelled node by
// topology_str, in the order slurmctld survives, while a job runs on it. The operator runs on
// a real API server against a real slurmctld 26.05 with slurmrestd and three dynamic slurmd of
// its own (privateSlurm, in the 26.05 test bed's root filesystem); the test plays kubelet,
// copying topology.yaml from the operator's ConfigMap to slurmctld's configuration directory.
//
//  1. gpu-2 relabelled to a leaf slurmctld has: a node update moves it at once (its Topology=
//     says so), the next file drops its old leaf, slurmctld reconfigures and stays up, the job
//     completes.
//  2. every node relabelled under a new top switch: the file gets the new leaf and keeps the
//     old switches, which gpu-2's string still names; the reconfigure moves the nodes placed
//     by the file; once slurmctld runs it, an update moves gpu-2; the next file drops the old
//     switches; slurmctld stays up, the job completes.
func TestTopologyStrMovesOnRealSlurm(t *testing.T) {
	t.Setenv("SUNK_SLURM_VERSION", "26.05")
	if v := testenv.Slurm(t).SlurmVersion; v < "25.05" {
		t.Fatalf("the 26.05 test bed runs Slurm %s", v)
	}
	ctx := context.Background()
	var sl atomic.Value        // slurm.Client, once slurmrestd runs
	var watcherIP atomic.Value // string, once the node watcher runs
	var lists atomic.Int32
	h := startOperator(t, startAPI(t), func(r *slurmcluster.Reconciler) {
		r.TopologySettle, r.TopologyMaxDelay = 2*time.Second, 10*time.Second
		r.Slurm = slurmconn.New(slurmconn.Options{Reader: watcherAt{Reader: kube.CacheThenAPIReader{Cache: r.Client, API: r.APIReader}, service: "topo-nodewatch", ip: &watcherIP},
			Factory: func(string, slurmconn.Keys, *http.Client) (slurm.Client, error) {
				if c, ok := sl.Load().(slurm.Client); ok {
					return noNodeList{Client: c, lists: &lists}, nil
				}
				return nil, fmt.Errorf("slurmrestd not started yet")
			}})
	})
	const spine, leaf = "example.com/spine", "example.com/leaf"
	for name, l := range map[string][2]string{"k8s-a": {"spine-1", "leaf-a"}, "k8s-b": {"spine-1", "leaf-b"}, "k8s-c": {"spine-1", "leaf-c"}} {
		must(t, h.c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{spine: l[0], leaf: l[1]}}}))
	}
	relabel := func(node, s, l string) {
		t.Helper()
		n := &corev1.Node{}
		must(t, h.get(t, node, n))
		n.Labels = map[string]string{spine: s, leaf: l}
		must(t, h.c.Update(ctx, n))
	}
	nodes := []string{"gpu-0", "gpu-1", "gpu-2"}
	for i, pod := range nodes {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: pod, Labels: map[string]string{wellknown.LabelCluster: "topo",
				wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelSlurmVersion: sunkv1.SlurmVersion2605}},
			Spec: corev1.PodSpec{NodeName: []string{"k8s-a", "k8s-b", "k8s-c"}[i], Containers: []corev1.Container{{Name: "slurmd", Image: "sunk.dev/slurm:26.05-local"}}},
		}
		must(t, h.c.Create(ctx, p))
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		must(t, h.c.Status().Update(ctx, p))
	}
	must(t, h.c.Create(ctx, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "topo"},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: sunkv1.SlurmVersion2605, Image: "sunk.dev/slurm:26.05-local",
			Topology:   &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{spine, leaf}}},
			Controller: sunkv1.ControllerSpec{NodeWatcher: true}},
	}))
	configMap := func() *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		if err := h.get(t, "topo-config", cm); err != nil {
			return nil
		}
		return cm
	}
	var first string
	eventually(t, "the first topology.yaml", func() error {
		if cm := configMap(); cm != nil && strings.Contains(cm.Data[render.TopologyYAMLFile], "nodes: \"gpu-2\"") {
			first = cm.Data[render.TopologyYAMLFile]
			return nil
		}
		return fmt.Errorf("no topology.yaml with gpu-2 yet")
	})

	priv := startPrivateSlurm(t, first, nodes)
	jwt, tlsSecret := &corev1.Secret{}, &corev1.Secret{}
	must(t, h.get(t, "topo-jwt-key", jwt))
	must(t, h.get(t, "topo-tls", tlsSecret))
	watcherIP.Store(priv.startNodeWatcher(t, jwt.Data[wellknown.SecretJWTKey], tlsSecret.Data))
	sl.Store(priv.client(t))
	// Kubelet: the ConfigMap's topology.yaml into slurmctld's directory, then slurm.conf's first
	// line (its hash) into what the pod shows the operator, which then reconfigures.
	stop := make(chan struct{})
	kubeletDone := make(chan struct{})
	go func() {
		defer close(kubeletDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if cm := configMap(); cm != nil && cm.Data[render.TopologyYAMLFile] != "" {
				priv.WriteEtc(t, render.TopologyYAMLFile, cm.Data[render.TopologyYAMLFile])
				h.exec.deliver("topo-controller-0", cm.Data["slurm.conf"])
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-kubeletDone })
	h.runControlPlane(t, "topo")

	leafOf := func(sw string) string { // the nodes of a leaf switch, "" when slurmctld has none such
		out, err := priv.Scontrol("show", "topology", "tree")
		if err != nil {
			return "error: " + out
		}
		m := regexp.MustCompile(`(?m)^SwitchName=` + regexp.QuoteMeta(sw) + ` Level=0 .*?Nodes=(\S*)`).FindStringSubmatch(out)
		if m == nil {
			return ""
		}
		return m[1]
	}
	nodeTopology := func(node string) string {
		out, _ := priv.Scontrol("show", "node", node)
		m := regexp.MustCompile(`Topology=(\S+)`).FindStringSubmatch(out)
		if m == nil {
			return ""
		}
		return m[1]
	}
	slow := func(what string, cond func() error) { wait.For(t, what, 90*time.Second, 300*time.Millisecond, cond) }
	slow("the first reconfigure places gpu-2 in leaf-c", func() error {
		if got := leafOf("leaf-c"); got != "gpu-2" {
			return fmt.Errorf("leaf-c: %q", got)
		}
		return nil
	})
	ctldUp := func() {
		t.Helper()
		if out, err := priv.Scontrol("ping"); err != nil || !strings.Contains(out, "is UP") {
			t.Fatalf("slurmctld: %s %v", out, err)
		}
	}
	job := func() string {
		t.Helper()
		id, err := priv.Run("sbatch", "--parsable", "-o", "/dev/null", "-w", "gpu-2", "--wrap", "sleep 25")
		must(t, err)
		slow("job "+id+" running", func() error {
			if out, _ := priv.Scontrol("show", "job", id); !strings.Contains(out, "JobState=RUNNING") {
				return fmt.Errorf("%s", out)
			}
			return nil
		})
		return id
	}
	jobState := func(id string) string {
		out, _ := priv.Scontrol("show", "job", id)
		m := regexp.MustCompile(`JobState=(\S+)`).FindStringSubmatch(out)
		if m == nil {
			return out
		}
		return m[1]
	}
	completes := func(id string) {
		t.Helper()
		slow("job "+id+" completes", func() error {
			if s := jobState(id); s != "COMPLETED" {
				return fmt.Errorf("job %s: %s", id, s)
			}
			return nil
		})
	}
	fileLacks := func(what, unit string) {
		t.Helper()
		slow(what, func() error {
			if y := configMap().Data[render.TopologyYAMLFile]; strings.Contains(y, unit) {
				return fmt.Errorf("topology.yaml still has %s:\n%s", unit, y)
			}
			if out, err := priv.Scontrol("show", "topology", "tree"); err != nil || strings.Contains(out, "SwitchName="+unit+" ") {
				return fmt.Errorf("slurmctld still has %s: %s %v", unit, out, err)
			}
			return nil
		})
	}

	// 1. To a leaf slurmctld has: one node update, then the old leaf goes.
	id := job()
	relabel("k8s-c", "spine-1", "leaf-a")
	slow("gpu-2 moved to leaf-a by topology_str", func() error {
		if got, top := leafOf("leaf-a"), nodeTopology("gpu-2"); got != "gpu-[0,2]" || top != "tree:spine-1-sw:leaf-a" {
			return fmt.Errorf("leaf-a %q, gpu-2 Topology=%q", got, top)
		}
		return nil
	})
	if s := jobState(id); s != "RUNNING" {
		t.Errorf("job %s is %s after the move, before its end", id, s)
	}
	fileLacks("leaf-c gone from the file and slurmctld", "leaf-c")
	ctldUp()
	if got := leafOf("leaf-a"); got != "gpu-[0,2]" {
		t.Errorf("after the reconfigure without leaf-c, leaf-a has %q", got)
	}
	completes(id)

	// 2. Every node under a new top switch: gpu-0 and gpu-1, placed by the file, and gpu-2,
	// whose string names spine-1-sw. The file gets leaf-d and keeps spine-1-sw:leaf-a for
	// gpu-2's string (without it the reconfigure would fail on "Don't know where to add switch
	// spine-1-sw" and end slurmctld); the reconfigure moves gpu-0 and gpu-1; the update moves
	// gpu-2; the next file drops spine-1-sw and leaf-a.
	id = job()
	relabel("k8s-a", "spine-2", "leaf-d")
	relabel("k8s-b", "spine-2", "leaf-d")
	relabel("k8s-c", "spine-2", "leaf-d")
	slow("the file has leaf-d and keeps spine-1-sw:leaf-a for gpu-2's string", func() error {
		y := configMap().Data[render.TopologyYAMLFile]
		if !strings.Contains(y, "- switch: \"leaf-d\"\n        nodes: \"gpu-[0-2]\"") || !strings.Contains(y, "spine-1-sw:leaf-a kept without nodes: gpu-2's topology_str") {
			return fmt.Errorf("topology.yaml:\n%s", y)
		}
		return nil
	})
	slow("gpu-2 moved to leaf-d by topology_str", func() error {
		if got, top := leafOf("leaf-d"), nodeTopology("gpu-2"); got != "gpu-[0-2]" || top != "tree:spine-2-sw:leaf-d" {
			return fmt.Errorf("leaf-d %q, gpu-2 Topology=%q", got, top)
		}
		return nil
	})
	if s := jobState(id); s != "RUNNING" {
		t.Errorf("job %s is %s after the move, before its end", id, s)
	}
	if top := nodeTopology("gpu-0"); top != "" {
		t.Errorf("gpu-0, moved by the file, has Topology=%q", top)
	}
	fileLacks("spine-1-sw gone from the file and slurmctld", "spine-1-sw")
	fileLacks("leaf-a gone from the file and slurmctld", "leaf-a")
	ctldUp()
	completes(id)
	// The moves were planned on topology_str read through the node watcher's cache.
	if n := lists.Load(); n != 0 {
		t.Errorf("the operator listed every node through slurmrestd %d times; want none (the node watcher's cache)", n)
	}
	eventually(t, "TopologyReady Placed", func() error {
		sc := h.cluster(t, "topo")
		if c := condition(sc, sunkv1.ConditionTopologyReady); c.Reason != sunkv1.ReasonTopologyPlaced {
			return fmt.Errorf("TopologyReady %+v", c)
		}
		if c := condition(sc, sunkv1.ConditionConfigApplied); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ConfigApplied %+v", c)
		}
		return nil
	})
}
