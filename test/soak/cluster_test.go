//go:build soak

// The cluster as the soak sees it: pods, processes, the login pod, helm, metrics endpoints.

package soak

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sunk.dev/sunk/test/testenv"
)

func (s *soak) pods(c component) ([]corev1.Pod, error) {
	l, err := s.cs.CoreV1().Pods(c.ns).List(s.ctx, metav1.ListOptions{LabelSelector: c.selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// podOf is the component's running pod.
func (s *soak) podOf(c component) (*corev1.Pod, error) {
	pods, err := s.pods(c)
	if err != nil {
		return nil, err
	}
	holder := ""
	if c.lease != "" {
		l, err := s.cs.CoordinationV1().Leases(c.ns).Get(s.ctx, c.lease, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s's lease: %w", c.name, err)
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
	}
	for i := range pods {
		p := &pods[i]
		// controller-runtime's identity is "<hostname>_<uuid>", the hostname the pod's name.
		if holder != "" && !strings.HasPrefix(holder, p.Name+"_") {
			continue
		}
		if p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running %s pod (%s in %s, leader %q)", c.name, c.selector, c.ns, holder)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pid finds the component's process on this host: its name in a container of its pod.
func (s *soak) pid(c component) (int, *corev1.Pod, error) {
	p, err := s.podOf(c)
	if err != nil {
		return 0, nil, err
	}
	for _, st := range p.Status.ContainerStatuses {
		_, id, ok := strings.Cut(st.ContainerID, "://")
		if !ok || st.State.Running == nil {
			continue
		}
		pids, err := FindProcess("/proc", id, c.comm)
		if err != nil {
			return 0, p, err
		}
		if len(pids) > 0 {
			sort.Ints(pids)
			return pids[0], p, nil
		}
	}
	return 0, p, fmt.Errorf("no %s process in pod %s", c.comm, p.Name)
}

func (s *soak) loginPod() (string, error) {
	p, err := s.podOf(loginC)
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

// login runs a shell command in the login pod, as a user at the login node would.
func (s *soak) login(script string) (string, error) {
	return s.loginCtx(s.ctx, 2*time.Minute, script)
}

func (s *soak) loginCtx(ctx context.Context, timeout time.Duration, script string) (string, error) {
	pod, err := s.loginPod()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.exec.Exec(ctx, slurmNS, pod, "login", "sh", "-c", script)
}

// nodes are the Slurm nodes of the NodeSet compute, which the soak scales; those of the
// autoscaled NodeSet burst come and go with the queue (burstFigures).
func (s *soak) nodes() ([]Node, error) {
	out, err := s.login("sinfo -h -N -o '%N|%T|%E'")
	if err != nil {
		return nil, err
	}
	var compute []Node
	for _, n := range ParseNodes(out) {
		if strings.HasPrefix(n.Name, "compute-") {
			compute = append(compute, n)
		}
	}
	return compute, nil
}

func (s *soak) helmErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(testenv.CacheDir(), "bin", "helm"), args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.cl.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (s *soak) helm(args ...string) string {
	s.t.Helper()
	out, err := s.helmErr(args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// metricsToken is a ServiceAccount token allowed GET /metrics: kube-scheduler, the operator
// and the syncer (metrics.secure) authorize their /metrics (TokenReview + SubjectAccessReview).
func (s *soak) metricsToken() string {
	const name = "sunk-soak-metrics"
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := s.cs.RbacV1().ClusterRoles().Create(s.ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return testenv.ServiceAccountToken(s.t, s.cs, slurmNS, name, name, 4*time.Hour)
}

// scrape reads a sunk component's /metrics from its pod IP (this machine's pod network).
func (s *soak) scrape(c component) ([]Series, *corev1.Pod, error) {
	p, err := s.podOf(c)
	if err != nil {
		return nil, nil, err
	}
	port := metricsPort
	if c.name == scheduler.name {
		port = schedPort
	}
	url := fmt.Sprintf("%s://%s:%d/metrics", c.metrics, p.Status.PodIP, port)
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, p, err
	}
	if c.metrics == "https" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return nil, p, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, p, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, p, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	series, err := ParseMetrics(string(body))
	return series, p, err
}
