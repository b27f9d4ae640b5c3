//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
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
	"sunk.dev/sunk/internal/container"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/registry"
	"sunk.dev/sunk/test/testenv"
)

// TestContainersForJobs runs Pyxis's --container-image on a Slurm 26.05 SlurmCluster whose
// NodeSet "ctr-*" enables containers (spec.containers) and whose NodeSet "plain-*" does not, against real
// registries on the Kubernetes node's address that want credentials (distribution's htpasswd),
// with images the test built. ctr-* has the credentials of one of them (imagePullSecrets):
// `srun -N2` prints the image's os-release on both compute pods as the user's uid; the other
// registry refuses in one line; sbatch, --container-name, --container-mounts of a shared
// volume work; bad input fails the step in one line and leaves the node idle; two jobs pulling
// one image at once fetch each blob once; on "plain-*" the step fails with the helper's one
// line; every container is gone once its job ended.
//
// Slurm 24.11's plugin is proven where it costs less than a second cluster: its steps on real
// 24.11 daemons in test/integration/container (TestSlurmSteps), and the 24.11 image's plugin
// loaded by srun and slurmstepd in TestUpgrade2411To2605.
func TestContainersForJobs(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()

	// The registries listen on the node's address, which the compute pods reach.
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
	users := map[string]string{"node": "node-pw"}
	var r ctrRegistries
	r.addr, r.accessLog = registry.StartWith(t, filepath.Join(dir, "a"), nodeIP, users)
	r.other, _ = registry.StartWith(t, filepath.Join(dir, "b"), nodeIP, users)
	r.image = r.addr + "/test/os:1"
	rootfs := registry.BusyboxRootFS(t, dir)
	registry.PushAs(t, "node:node-pw", filepath.Join(dir, "layout"), rootfs, r.image, nil)
	registry.PushAs(t, "node:node-pw", filepath.Join(dir, "layout-b"), rootfs, r.other+"/test/os:1", nil)
	// "twice": another image (another file), pulled by two jobs at once.
	if err := os.WriteFile(filepath.Join(rootfs, "twice"), []byte("twice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	registry.PushAs(t, "node:node-pw", filepath.Join(dir, "layout-twice"), rootfs, r.addr+"/test/twice:1", nil)
	raw, err := exec.Command("skopeo", "inspect", "--raw", "--tls-verify=false", "--creds=node:node-pw", "docker://"+r.addr+"/test/twice:1").Output()
	if err != nil {
		t.Fatalf("skopeo inspect test/twice:1: %v", err)
	}
	r.twiceDigest = fmt.Sprintf("sha256:%x", sha256.Sum256(raw))

	e.containersForJobs(t, sunkv1.SlurmVersion2605, r)
}

// ctrRegistries are TestContainersForJobs's registries: addr, whose credentials the NodeSet
// has, with test/os:1 (image) and test/twice:1 (its manifest's digest twiceDigest), and
// other, whose it has not.
type ctrRegistries struct {
	addr, other, image, accessLog, twiceDigest string
}

// containersForJobs is TestContainersForJobs on a cluster of release v: NodeSets ctr-NN (two
// pods, containers) and plain-NN (one pod, none), NN the release's major version.
func (e *operatorEnv) containersForJobs(t *testing.T, v string, r ctrRegistries) {
	ctx := context.Background()
	image := r.image
	sfx := strings.Split(v, ".")[0]
	ctr, plain := "ctr-"+sfx, "plain-"+sfx
	// A shared volume (the environment's default StorageClass) and the registry's credentials.
	claim := "shared-" + sfx
	if err := e.c.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}); err != nil {
		t.Fatal(err)
	}
	secret := "registry-" + sfx
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: secret}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: container.AuthFile(r.addr, "node", "node-pw")}}); err != nil {
		t.Fatal(err)
	}
	sc := &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "c" + sfx},
		Spec: sunkv1.SlurmClusterSpec{
			SlurmVersion: v, ImagePullPolicy: corev1.PullNever,
			Partitions:    []sunkv1.PartitionSpec{{Name: "ctr", NodeSets: []string{ctr}, Default: true}, {Name: "plain", NodeSets: []string{plain}}},
			SharedVolumes: []sunkv1.SharedVolume{{Name: "shared", ClaimName: claim, MountPath: "/shared"}},
		},
	}
	e.createReady(t, sc)
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("400Mi")}}
	for _, ns := range []*sunkv1.NodeSet{
		{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: ctr}, Spec: sunkv1.NodeSetSpec{
			ClusterRef: sc.Name, Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(2)), Resources: small,
			// Two CPUs (the machine's), not the one a 100m request gives: two jobs run on one
			// pod at once (moreContainers).
			ExtraConf: "CPUs=2",
			Containers: &sunkv1.NodeSetContainers{Enabled: true, CacheSize: ptr.To(resource.MustParse("1Gi")),
				InsecureRegistries: []string{r.addr, r.other}, ImagePullSecrets: []sunkv1.SecretName{{Name: secret}}}}},
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
	srun := testenv.AsUser("srun -p ctr -N2 -l -D /tmp --container-image=") + image +
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
	if out, err := e.sh(t, login, "login", testenv.AsUser("srun -p ctr -N2 -l -D /tmp cat /etc/os-release")); err != nil || strings.Count(out, `PRETTY_NAME="Debian`) != 2 {
		t.Errorf("srun -N2 without a container: %v %q", err, out)
	}
	t.Logf("bench: name=srun-N2-container-%s cold=%.2fs warm=%.2fs plain=%.2fs", v, cold.Seconds(), warm.Seconds(), time.Since(start).Seconds())

	// A NodeSet without containers refuses with one clear line; its node stays idle.
	out, err = e.sh(t, login, "login", testenv.AsUser("srun -p plain -N1 -D /tmp --container-image=")+image+" true 2>&1")
	if err == nil || !strings.Contains(out, "sunk-container: containers are not enabled on this node") {
		t.Errorf("srun --container-image on plain: err = %v, output %q; want the step refused with %q", err, out, "containers are not enabled on this node")
	}
	// Without a container the same node runs the step.
	if out, err := e.sh(t, login, "login", testenv.AsUser("srun -p plain -N1 -D /tmp cat /etc/os-release")); err != nil || !strings.Contains(out, "Debian") {
		t.Errorf("srun on plain without a container: %v %q", err, out)
	}
	// The helper's volume is root's, 0755 (the entrypoint; kubelet made it 0777): a plain user's
	// job can neither create nor rename there, so it cannot plant a link for the helper, root,
	// to follow (docs/containers.md; TestSlurmSteps plays the whole attack).
	vol := render.ContainersDir
	out, err = e.sh(t, login, "login", testenv.AsUser("srun -p ctr -N1 -w ")+ctr+"-0 -D /tmp sh -c '"+
		"stat -c %a:%U "+vol+"; mkdir "+vol+"/x 2>/dev/null && echo made; mv "+vol+"/images "+vol+"/aside 2>/dev/null && echo moved; true'")
	if err != nil || out != "755:root\n" {
		t.Errorf("a plain user's job on %s's %s: %v %q, want 755:root and every change refused", ctr, vol, err, out)
	}
	e.moreContainers(t, login, ctr, r)
	e.waitIdle(t, login, time.Minute, "every node idle after the steps (none drained)", nodes...)

	// Every container is gone once its job ended (the reapers, or the epilog: with
	// proctrack/cgroup the step's end may kill a reaper).
	// The cache is consistent: whole images with their records, no pull's leftovers (ctr-NN-0
	// also has "twice").
	cached := regexp.MustCompile(`^([0-9a-f]{64}\n[0-9a-f]{64}\.env\n[0-9a-f]{64}\.size\n[0-9a-f]{64}\.used\n){1,2}--\n$`)
	for _, pod := range nodes[:2] {
		poll(t, time.Minute, "no container left on "+pod, func() error {
			out, err := e.sh(t, pod, "slurmd", "cd "+render.ContainersDir+" && ls -A containers images/oci images/pulls images/auth 2>/dev/null | grep -v :; ls images/rootfs; echo --")
			if err != nil || !cached.MatchString(strings.TrimLeft(out, "\n")) {
				return fmt.Errorf("%v: %q (want no container, the cached images with .env, .size and .used, and nothing else)", err, out)
			}
			return nil
		})
	}
}
