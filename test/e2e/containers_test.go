//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/registry"
)

// TestContainersForJobs runs Pyxis's --container-image on a SlurmCluster of each release (26.05,
// the default, then 24.11: each image carries a plugin built against its own Slurm) whose
// NodeSet "ctr-*" enables containers (spec.containers) and whose NodeSet "plain-*" does not,
// against a real registry on the Kubernetes node's address with an image the test built:
// `srun -N2` prints the image's os-release on both compute pods as the user's uid; on "plain-*"
// the step fails with the helper's one line and the node stays idle; every container is gone
// once its job ended.
func TestContainersForJobs(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()

	// The registry listens on the node's address, which the compute pods reach.
	var node corev1.Node
	if err := e.c.Get(ctx, types.NamespacedName{Name: e.NodeName}, &node); err != nil {
		t.Fatal(err)
	}
	var nodeIP string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	if nodeIP == "" {
		t.Fatalf("node %s has no InternalIP: %+v", e.NodeName, node.Status.Addresses)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr, _ := registry.Start(t, dir, nodeIP)
	image := addr + "/test/os:1"
	registry.Push(t, filepath.Join(dir, "layout"), registry.BusyboxRootFS(t, dir), image, nil)

	for _, v := range []string{sunkv1.SlurmVersion2411, sunkv1.SlurmVersion2605} {
		t.Run(v, func(t *testing.T) { e.containersForJobs(t, v, addr, image) })
	}
}

// containersForJobs is TestContainersForJobs on a cluster of release v: NodeSets ctr-NN (two
// pods, containers) and plain-NN (one pod, none), NN the release's major version.
func (e *operatorEnv) containersForJobs(t *testing.T, v, addr, image string) {
	ctx := context.Background()
	sfx := strings.Split(v, ".")[0]
	ctr, plain := "ctr-"+sfx, "plain-"+sfx
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "c" + sfx},
		Spec: sunkv1.SlurmClusterSpec{
			SlurmVersion: v, ImagePullPolicy: corev1.PullNever,
			Partitions: []sunkv1.PartitionSpec{{Name: "ctr", NodeSets: []string{ctr}, Default: true}, {Name: "plain", NodeSets: []string{plain}}},
		},
	}
	e.createReady(t, sc)
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("400Mi")}}
	for _, ns := range []*sunkv1.NodeSet{
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: ctr}, Spec: sunkv1.NodeSetSpec{
			ClusterRef: sc.Name, Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(2)), Resources: small,
			Containers: &sunkv1.NodeSetContainers{Enabled: true, CacheSize: ptr.To(resource.MustParse("1Gi")), InsecureRegistries: []string{addr}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: plain}, Spec: sunkv1.NodeSetSpec{
			ClusterRef: sc.Name, Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(1)), Resources: small}},
	} {
		if err := e.c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	login := e.podOf(t, sc.Name, wellknown.ComponentLogin).Name
	nodes := []string{ctr + "-0", ctr + "-1", plain + "-0"}
	start := time.Now()
	e.waitIdle(t, login, 4*time.Minute, "the compute nodes idle", nodes...)
	t.Logf("compute nodes idle %s after the NodeSets were created", time.Since(start).Round(time.Second))
	// plugstack.conf is the cluster's: the login pod's clients load the plugin too, and so do the
	// slurmds of plain-NN. The pods of ctr-NN start only once slurmctld runs it (the NodeSet waits
	// for ContainersEnabled); plain-NN's started before and get it with the reconfigure.
	for _, p := range append([]string{login}, nodes...) {
		container := "slurmd"
		if p == login {
			container = "login"
		}
		poll(t, 2*time.Minute, "plugstack.conf with the plugin in "+p, func() error {
			out, err := e.sh(t, p, container, "cat /run/slurm/conf/plugstack.conf")
			if err != nil || !strings.Contains(out, "required "+render.SpankPlugin) {
				return fmt.Errorf("%v %q", err, out)
			}
			return nil
		})
	}

	// A user's step on both nodes of the enabled NodeSet: the image's file, the user's uid.
	uid := strings.TrimSpace(e.mustSh(t, login, "login", "id -u nobody"))
	srun := "cd /tmp && runuser -u nobody -- srun -p ctr -N2 -l -D /tmp --container-image=" + image +
		` sh -c 'echo "node $SLURMD_NODENAME uid $(id -u)"; cat /etc/os-release'`
	start = time.Now()
	out, err := e.sh(t, login, "login", srun)
	cold := time.Since(start)
	if err != nil {
		t.Fatalf("srun -N2 --container-image: %v\n%s", err, out)
	}
	t.Logf("srun -N2 --container-image printed:\n%s", out)
	for _, want := range []string{"node " + ctr + "-0 uid " + uid, "node " + ctr + "-1 uid " + uid} {
		if !strings.Contains(out, want) {
			t.Errorf("srun -N2 --container-image printed %q, want a line %q", out, want)
		}
	}
	if n := strings.Count(out, `PRETTY_NAME="sunk test image 1"`); n != 2 || strings.Contains(out, "Debian") {
		diag, _ := e.sh(t, ctr+"-0", "slurmd", "cat /run/slurm/conf/plugstack.conf; ls -l /run/sunk; cat /run/sunk/containers.conf")
		t.Errorf("srun -N2 --container-image printed %q, want the image's os-release from each of the two nodes (%d); %s-0:\n%s", out, n, ctr, diag)
	}
	// Times, for docs/containers.md (a cold cache pulls the image; a warm one finds it).
	start = time.Now()
	if out, err := e.sh(t, login, "login", srun); err != nil || strings.Count(out, "sunk test image 1") != 2 {
		t.Errorf("srun -N2 --container-image again: %v %q", err, out)
	}
	warm := time.Since(start)
	start = time.Now()
	if out, err := e.sh(t, login, "login", "cd /tmp && runuser -u nobody -- srun -p ctr -N2 -l -D /tmp cat /etc/os-release"); err != nil || strings.Count(out, `PRETTY_NAME="Debian`) != 2 {
		t.Errorf("srun -N2 without a container: %v %q", err, out)
	}
	t.Logf("bench: name=srun-N2-container-%s cold=%.2fs warm=%.2fs plain=%.2fs", v, cold.Seconds(), warm.Seconds(), time.Since(start).Seconds())

	// A NodeSet without containers refuses with one clear line; its node stays idle.
	out, err = e.sh(t, login, "login", "cd /tmp && runuser -u nobody -- srun -p plain -N1 -D /tmp --container-image="+image+" true 2>&1")
	if err == nil || !strings.Contains(out, "sunk-container: containers are not enabled on this node") {
		t.Errorf("srun --container-image on plain: err = %v, output %q; want the step refused with %q", err, out, "containers are not enabled on this node")
	}
	// Without a container the same node runs the step.
	if out, err := e.sh(t, login, "login", "cd /tmp && runuser -u nobody -- srun -p plain -N1 -D /tmp cat /etc/os-release"); err != nil || !strings.Contains(out, "Debian") {
		t.Errorf("srun on plain without a container: %v %q", err, out)
	}
	e.waitIdle(t, login, time.Minute, "every node idle after the steps (none drained)", nodes...)

	// Every container is gone once its job ended (the reapers, or the epilog: with
	// proctrack/cgroup the step's end may kill a reaper).
	for _, pod := range nodes[:2] {
		poll(t, time.Minute, "no container left on "+pod, func() error {
			out, err := e.sh(t, pod, "slurmd", "ls -A "+render.ContainersDir+"/containers; ls "+render.ContainersDir+"/images/rootfs")
			if err != nil || !regexp.MustCompile(`^[0-9a-f]{64}\n[0-9a-f]{64}\.env\n$`).MatchString(out) {
				return fmt.Errorf("%v: %q (want no container and one cached image)", err, out)
			}
			return nil
		})
	}
}
