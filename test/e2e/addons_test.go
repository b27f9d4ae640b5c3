//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"sunk.dev/sunk/test/testenv"
)

const busyboxImage = "docker.io/library/busybox:local"

// CoreDNS (hack/manifests/coredns.yaml) answers cluster.local at kubelet's clusterDNS: a pod
// resolves the kubernetes Service and a pod behind a headless Service by hostname.subdomain,
// the way slurmctld-0.<svc>.<ns>.svc.cluster.local will be resolved, and the answers are the
// IPs the API server holds.
func TestClusterDNSResolvesServicesAndPods(t *testing.T) {
	parallel(t)
	cluster := testenv.Cluster(t)
	ctx := context.Background()
	cs := cluster.Clientset
	ns := addonNamespace(t, cs, "e2e-dns")
	core := cs.CoreV1()

	kubeSvc, err := core.Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ctld"},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": "dns-target"},
			Ports:     []corev1.ServicePort{{Name: "p", Port: 6817}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	target := busyboxPod("target", "exec sleep 3600")
	target.Labels = map[string]string{"app": "dns-target"}
	target.Spec.Hostname, target.Spec.Subdomain = "target-0", "ctld"
	target.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := core.Pods(ns).Create(ctx, target, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	target = waitPod(t, cs, ns, "target", 90*time.Second, podReady)

	// The pod is published under its hostname once the EndpointSlice says so.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=ctld"})
		if err != nil {
			return false, err
		}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Hostname != nil && *e.Hostname == "target-0" && e.Conditions.Ready != nil && *e.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("headless Service ctld has no ready endpoint target-0: %v", err)
	}

	names := map[string]string{
		"kubernetes.default.svc.cluster.local":                kubeSvc.Spec.ClusterIP,
		fmt.Sprintf("target-0.ctld.%s.svc.cluster.local", ns): target.Status.PodIP,
		fmt.Sprintf("ctld.%s.svc.cluster.local", ns):          target.Status.PodIP,
	}
	// Lookups retry for up to 20 s in all: CoreDNS learns of the endpoint by a watch.
	script := strings.Builder{}
	script.WriteString("end=$(($(date +%s) + 20))\n")
	for name := range names {
		fmt.Fprintf(&script, "until timeout 3 nslookup %[1]s >/dev/null 2>&1 || [ $(date +%%s) -ge $end ]; do sleep 0.2; done\n", name)
		fmt.Fprintf(&script, "echo '=== %[1]s'; nslookup %[1]s; echo \"--- rc $?\"\n", name)
	}
	client := busyboxPod("client", script.String())
	if _, err := core.Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "client", 90*time.Second, podSucceeded)
	logs := podLogs(t, cs, ns, "client")
	t.Logf("client pod:\n%s", logs)
	got := parseNslookup(logs)
	for name, want := range names {
		if want == "" {
			t.Fatalf("no IP in the API for %s", name)
		}
		if addrs := got[name]; len(addrs) != 1 || addrs[0] != want {
			t.Errorf("nslookup %s = %v, want [%s] (from the API)", name, addrs, want)
		}
	}
}

// The default StorageClass "standard" (kube-controller-manager's hostPath provisioner) binds
// ReadWriteOnce and ReadWriteMany claims with no one creating volumes by hand; the volumes are
// mounted by pods on the real kubelet, a second pod sees what the first wrote while both hold
// the shared claim, the data lives in the environment's state directory, and deleting the
// claims deletes the volumes and their directories.
func TestDefaultStorageClassProvisionsSharedVolumes(t *testing.T) {
	parallel(t)
	cluster := testenv.Cluster(t)
	ctx := context.Background()
	cs := cluster.Clientset
	ns := addonNamespace(t, cs, "e2e-pv")
	core := cs.CoreV1()

	claims := map[string]corev1.PersistentVolumeAccessMode{"shared": corev1.ReadWriteMany, "own": corev1.ReadWriteOnce}
	for name, mode := range claims {
		pvc, err := core.PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{mode},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc := pvc.Spec.StorageClassName; sc == nil || *sc != "standard" {
			t.Fatalf("claim %s got storage class %v, want the default \"standard\"", name, sc)
		}
	}
	volumes := map[string]*corev1.PersistentVolume{}
	for name, mode := range claims {
		var pvc *corev1.PersistentVolumeClaim
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			pvc, err = core.PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
		})
		if err != nil {
			t.Fatalf("claim %s not Bound: %v (status %+v)", name, err, pvc.Status)
		}
		pv, err := core.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pv.Spec.HostPath == nil || !slices.Contains(pv.Spec.AccessModes, mode) {
			t.Fatalf("volume %s of claim %s: hostPath %v, access modes %v; want a hostPath volume with %s", pv.Name, name, pv.Spec.HostPath, pv.Spec.AccessModes, mode)
		}
		volumes[name] = pv
	}

	message := fmt.Sprintf("m-%d", time.Now().UnixNano())
	writer := busyboxPod("writer", fmt.Sprintf("echo %s > /shared/msg && echo %s > /own/msg && exec sleep 3600", message, message))
	writer.Spec.RestartPolicy = corev1.RestartPolicyAlways
	mountClaims(writer, "shared", "own")
	writer.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-s", "/own/msg"}}},
		PeriodSeconds: 1,
	}
	if _, err := core.Pods(ns).Create(ctx, writer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "writer", 90*time.Second, podReady)

	reader := busyboxPod("reader", "cat /shared/msg")
	mountClaims(reader, "shared")
	if _, err := core.Pods(ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, ns, "reader", 90*time.Second, podSucceeded)
	if got := strings.TrimSpace(podLogs(t, cs, ns, "reader")); got != message {
		t.Fatalf("reader read %q from the shared claim, want %q (written by the writer pod)", got, message)
	}

	// The volumes' directories are in the state directory, behind the provisioner's fixed root.
	dirs := map[string]string{}
	for name, pv := range volumes {
		dir := filepath.Join(testenv.StateDir(), "kube", "hostpath-pv", filepath.Base(pv.Spec.HostPath.Path))
		if b, err := os.ReadFile(filepath.Join(dir, "msg")); err != nil || strings.TrimSpace(string(b)) != message {
			t.Fatalf("volume %s (%s) on the host: %q, %v; want %q in %s", pv.Name, pv.Spec.HostPath.Path, b, err, message, dir)
		}
		dirs[name] = dir
	}

	// Reclaim policy Delete: without pods and claims, the volumes and their data go.
	zero := int64(0)
	for _, p := range []string{"writer", "reader"} {
		if err := core.Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range claims {
		if err := core.PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, pv := range volumes {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := core.PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
			_, err = os.Stat(dirs[name])
			return os.IsNotExist(err), nil
		})
		if err != nil {
			t.Fatalf("volume %s of deleted claim %s: still there (or its directory %s): %v", pv.Name, name, dirs[name], err)
		}
	}
}

// addonNamespace creates a fresh namespace that is deleted when the test ends.
func addonNamespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// busyboxPod runs script with /bin/sh in the local busybox image, once, and stops at once.
func busyboxPod(name, script string) *corev1.Pod {
	grace := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "c", Image: busyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", script},
			}},
		},
	}
}

// mountClaims mounts each named claim at /<name>.
func mountClaims(pod *corev1.Pod, claims ...string) {
	for _, c := range claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: c, MountPath: "/" + c})
	}
}

func podReady(p *corev1.Pod) (bool, error) {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return false, fmt.Errorf("pod ended: %s", p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

func podSucceeded(p *corev1.Pod) (bool, error) {
	if p.Status.Phase == corev1.PodFailed {
		return false, fmt.Errorf("pod failed")
	}
	return p.Status.Phase == corev1.PodSucceeded, nil
}

// waitPod polls the pod until done says so, failing the test with the pod's status and logs.
func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string, timeout time.Duration, done func(*corev1.Pod) (bool, error)) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		return done(pod)
	})
	if err != nil {
		status := "<none>"
		if pod != nil {
			status = fmt.Sprintf("%+v", pod.Status)
		}
		logs, _ := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(context.Background())
		t.Fatalf("pod %s/%s: %v\nstatus: %s\nlogs:\n%s", ns, name, err, status, logs)
	}
	return pod
}

func podLogs(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, name, err)
	}
	return string(b)
}

// parseNslookup reads "=== NAME" sections of busybox nslookup output: the answer addresses
// that follow "Name: NAME" (the server's own "Address:" line comes before any Name line).
func parseNslookup(out string) map[string][]string {
	got := map[string][]string{}
	var section, answer string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch f := strings.Fields(line); {
		case strings.HasPrefix(line, "=== "):
			section, answer = strings.TrimPrefix(line, "=== "), ""
		case len(f) == 2 && f[0] == "Name:":
			answer = f[1]
		case len(f) == 2 && f[0] == "Address:" && answer != "" && answer == section:
			got[section] = append(got[section], f[1])
		}
	}
	return got
}
