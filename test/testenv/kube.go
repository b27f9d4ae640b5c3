package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// APIOptions tunes the API environment a test starts.
type APIOptions struct {
	// CRDDirectoryPaths are installed before the test runs (e.g. config/crd/bases).
	CRDDirectoryPaths []string
	// WebhookPaths are admission webhook manifests (e.g. config/webhook) that envtest
	// points at a local webhook server; Env.WebhookInstallOptions says where to serve.
	WebhookPaths []string
}

// API starts a private etcd + kube-apiserver for the test with controller-runtime's envtest,
// from the binaries hack/provision.sh builds, and stops it when the test ends.
func API(t testing.TB, opts APIOptions) *rest.Config {
	t.Helper()
	return APIEnv(t, opts).Config
}

// APIEnv is API returning the whole envtest environment (webhook serving options included).
func APIEnv(t testing.TB, opts APIOptions) *envtest.Environment {
	t.Helper()
	assets := filepath.Join(CacheDir(), "envtest")
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		hack(t, "provision.sh", "host", "tools")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: len(opts.CRDDirectoryPaths) > 0,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: opts.WebhookPaths},
	}
	if _, err := env.Start(); err != nil {
		// Start may fail after etcd and kube-apiserver run (a CRD the API server refuses):
		// stop them, or they outlive the test (seen: a CRD rule over its cost budget).
		_ = env.Stop()
		t.Fatalf("testenv: starting etcd + kube-apiserver (assets in %s): %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("testenv: stopping the API environment: %v", err)
		}
	})
	return env
}

// ClusterEnv is the local cluster of hack/env-kube.sh: a real control plane and one real
// kubelet node running containerd and runc.
type ClusterEnv struct {
	Kubeconfig string
	Config     *rest.Config
	Clientset  *kubernetes.Clientset
	NodeName   string
	stateDir   string
}

// Cluster starts the local cluster unless it is already up, and connects to it.
func Cluster(t testing.TB) *ClusterEnv {
	t.Helper()
	hack(t, "env-kube.sh", "up", "cluster")
	dir := filepath.Join(StateDir(), "kube")
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("testenv: loading %s: %v", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("testenv: clientset: %v", err)
	}
	return &ClusterEnv{Kubeconfig: kubeconfig, Config: cfg, Clientset: cs, NodeName: "sunk-node", stateDir: dir}
}

// Registry is the address (host:port) of the local cluster's image registry, which every node
// pulls from over plain HTTP (hack/registry.sh).
func (c *ClusterEnv) Registry(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.stateDir, "registry"))
	if err != nil {
		t.Fatalf("the local cluster's registry: %v (start the cluster with hack/env-kube.sh up cluster)", err)
	}
	return strings.TrimSpace(string(b))
}

// BuildImage packs rootfs into a single-layer image named ref and imports it into sunk-node's
// containerd, so that pods there can use it with imagePullPolicy Never.
func (c *ClusterEnv) BuildImage(t testing.TB, rootfs, ref string, entrypoint string) {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "image.tar")
	if out, err := run(filepath.Join(RepoRoot(), "hack", "mkimage.sh"), rootfs, ref, tarball, entrypoint); err != nil {
		t.Fatalf("testenv: building image %s: %v\n%s", ref, err, out)
	}
	if out, err := c.ctr("images", "import", tarball); err != nil {
		t.Fatalf("testenv: importing image %s: %v\n%s", ref, err, out)
	}
}

// Freeze stops a running container of a pod as a hung process stops: containerd pauses its task
// (the cgroup freezer), so it holds its sockets and answers nothing. The returned func thaws
// it; a test's cleanup thaws it too, whatever happens.
func (c *ClusterEnv) Freeze(t testing.TB, pod *corev1.Pod, container string) (thaw func()) {
	t.Helper()
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			id = strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	if id == "" {
		t.Fatalf("testenv: pod %s/%s has no running container %s", pod.Namespace, pod.Name, container)
	}
	if out, err := c.ctr("tasks", "pause", id); err != nil {
		t.Fatalf("testenv: pausing container %s of pod %s/%s: %v\n%s", container, pod.Namespace, pod.Name, err, out)
	}
	thawed := false
	thaw = func() {
		if thawed {
			return
		}
		thawed = true
		if out, err := c.ctr("tasks", "resume", id); err != nil {
			t.Errorf("testenv: resuming container %s of pod %s/%s: %v\n%s", container, pod.Namespace, pod.Name, err, out)
		}
	}
	t.Cleanup(thaw)
	return thaw
}

func (c *ClusterEnv) ctr(args ...string) (string, error) {
	all := append([]string{"-a", filepath.Join(c.stateDir, "containerd", "containerd.sock"), "-n", "k8s.io"}, args...)
	return run("ctr", all...)
}

// GoBinary builds a Go main package statically into dir/name, for test images.
func GoBinary(t testing.TB, pkgDir, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: go build %s: %v\n%s", pkgDir, err, b)
	}
}

// KwokNodes makes sure the cluster has n kwok fake nodes (kwok-node-1..n, label type=kwok,
// taint kwok.x-k8s.io/node=fake:NoSchedule), all Ready, for tests at scale.
func (c *ClusterEnv) KwokNodes(t testing.TB, n int) {
	t.Helper()
	hack(t, "env-kube.sh", "kwok", strconv.Itoa(n))
}
