//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/promtest"
	"sunk.dev/sunk/test/testenv"
)

var (
	serviceMonitors = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	prometheusRules = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

// TestMonitoring scrapes a live cluster the way a Prometheus Operator would: the sunk chart
// renders its ServiceMonitors (operator, syncer with the Slurm exporter, scheduler on
// kube-scheduler's authenticated port) because the monitoring.coreos.com API exists; the test
// turns exactly those monitors into a real Prometheus's configuration (promtest.ScrapeConfigs,
// with the targets from the Services' EndpointSlices) and scrapes the pods, with the token of a ServiceAccount bound
// to the chart's metrics-reader ClusterRole. While `sbatch -N3` runs, Prometheus counts three
// allocated nodes; the job is counted completed; a held job pending with its reason; a drained
// node as drained with its reason; and every PromQL expression of the shipped dashboards
// returns data, the syncer's, the controllers' and the scheduler's included. The same
// Prometheus evaluates the alerting rules of the chart's PrometheusRule: a cordon of the compute
// pods' Kubernetes node fires SunkSlurmNodeDrainedBySunk for the Slurm nodes the syncer drains,
// not for the one a person drained, and the uncordon ends it; a frozen slurmctld fires
// SunkSlurmUnreachable, and thawing it ends that.
func TestMonitoring(t *testing.T) {
	installPrometheusOperatorCRDs(t)
	h := startCharts(t)
	ctx := context.Background()
	const release = "mon"
	h.slurmRelease = release
	login := h.installSlurm(t, release, `image: {pullPolicy: Never}
partitions: [{name: main, default: true}]
nodeSets: [{name: compute, mode: Replicas, replicas: 3}]
`, "compute-0", "compute-1", "compute-2")

	// The scheduler needs the cluster's JWT key Secret; the short intervals make the test
	// quick (the defaults are 30 s).
	t.Logf("Slurm cluster of 3 compute pods ready")
	if _, err := h.helm(t, "upgrade", h.sunkRelease, "charts/sunk", "-n", h.sunkNS, "--reuse-values", "--wait", "--timeout", "3m",
		"--set", "scheduler.enabled=true", "--set", "scheduler.cluster.name="+release, "--set", "scheduler.cluster.namespace="+h.ns,
		"--set", "metrics.serviceMonitor.interval=2s", "--set", "metrics.serviceMonitor.scrapeTimeout=2s",
		"--set", "syncer.exporter.interval=2s", "--set", "syncer.exporter.userSeries=true",
		"--set", "metrics.prometheusRule.for.SunkSlurmNodeDrainedBySunk=0s", "--set", "metrics.prometheusRule.for.SunkSlurmUnreachable=0s"); err != nil {
		t.Fatal(err)
	}

	dyn, err := dynamic.NewForConfig(h.Config)
	if err != nil {
		t.Fatal(err)
	}
	monitors, err := dyn.Resource(serviceMonitors).Namespace(h.sunkNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := h.metricsReaderToken(t)
	var configs []any
	var jobs []string
	for i := range monitors.Items {
		sc, err := promtest.ScrapeConfigs(&monitors.Items[i], tokenFile, promtest.KubeDiscover(ctx, h.Clientset))
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, sc...)
		jobs = append(jobs, monitors.Items[i].GetName()+"-metrics")
	}
	want := []string{h.sunkRelease + "-operator-metrics", h.sunkRelease + "-scheduler-metrics", h.sunkRelease + "-syncer-metrics"}
	if strings.Join(jobs, " ") != strings.Join(want, " ") {
		t.Fatalf("the chart's ServiceMonitors scrape %v, want %v", jobs, want)
	}
	p := promtest.Start(t, configs, h.alertRules(t, dyn))
	for _, job := range jobs {
		p.WaitUp(t, job, 2*time.Minute)
	}
	t.Logf("Prometheus scrapes every target of %v", jobs)

	cluster := fmt.Sprintf(`cluster="%s/%s"`, h.ns, release)
	job := h.sbatchHeld(t, login, "-N3 --exclusive -J mon")
	h.promHas(t, p, fmt.Sprintf(`slurm_nodes{%s,state="allocated"}`, cluster), 3, "sbatch -N3 runs on three nodes")
	h.release(t, login, job)
	if state, exit, _ := h.jobEnd(t, login, job, 2*time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("job %s: %s %s", job, state, exit)
	}
	h.promHas(t, p, fmt.Sprintf(`sum(slurm_jobs{%s,state="completed"})`, cluster), 1, "the job counted completed")

	held := strings.TrimSpace(h.mustSh(t, login, testenv.AsUser("sbatch --parsable --hold -J mon-held --wrap true")))
	t.Cleanup(func() { _, _ = h.sh(t, login, "login", "scancel "+held) })
	h.promHas(t, p, fmt.Sprintf(`sum(slurm_jobs_pending{%s,reason=~"JobHeld.*"})`, cluster), 1, "the held job counted pending, with its reason")

	h.mustSh(t, login, "scontrol update nodename=compute-2 state=drain reason=e2e-monitoring")
	t.Cleanup(func() { _, _ = h.sh(t, login, "login", "scontrol update nodename=compute-2 state=resume") })
	h.promHas(t, p, fmt.Sprintf(`slurm_node_info{%s,node="compute-2",state="drained",reason="e2e-monitoring"}`, cluster), 1,
		"the drained node counted as drained, with its reason")

	// Two pods through sunk-scheduler give the scheduler's panels their series: one whose job
	// is cancelled in Slurm (evicted: a job ended), one deleted while its job runs (the
	// scheduler cancels the job).
	ended := h.schedulerPod(t, "mon-ended")
	h.mustSh(t, login, "scancel "+ended.Annotations[taintSlurmJob])
	poll(t, 2*time.Minute, "the pod of a cancelled job evicted", func() error {
		_, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, ended.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s still there: %v", ended.Name, err)
	})
	deleted := h.schedulerPod(t, "mon-deleted")
	if err := h.Clientset.CoreV1().Pods(h.ns).Delete(ctx, deleted.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}

	// A healthy run makes no failed slurmrestd request, and the errors panel shows only what
	// failed: a pod asking for more memory than any compute pod has makes Slurm refuse its job
	// ("Requested node configuration is not available"), one failed submission (outcome
	// slurm_error) in sunk-scheduler's series. (Too many CPUs would not do: Slurm queues such a
	// job, PENDING for PartitionConfig.)
	refused := busyboxPod("mon-refused", "sleep 3600")
	refused.Spec.SchedulerName = "sunk-scheduler"
	refused.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("512Gi"),
	}
	if _, err := h.Clientset.CoreV1().Pods(h.ns).Create(ctx, refused, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "Slurm's refusal of the 512Gi pod's job", func() error {
		if !h.hasEvent(t, refused.Name, "SlurmSubmitFailed") {
			return fmt.Errorf("no SlurmSubmitFailed event for pod %s yet", refused.Name)
		}
		return nil
	})

	// A job runs while the dashboards are read: the running-CPU panels have data only then.
	running := h.sbatch(t, login, "-N1 -J mon-run --wrap 'sleep 600'")
	t.Cleanup(func() { _, _ = h.sh(t, login, "login", "scancel "+running) })
	promtest.CheckDashboards(t, p, "10s", nil, 2*time.Minute)

	// Last, as it drains every compute pod's Slurm node: the node is shared with every other
	// test, and uncordoned whatever happens.
	node := h.nodeOf(t, "compute-0")
	t.Cleanup(func() { h.setUnschedulable(t, node, false) })
	h.setUnschedulable(t, node, true)
	drainedBySunk := func() ([]string, error) {
		firing, err := p.Firing("SunkSlurmNodeDrainedBySunk")
		var nodes []string
		for _, s := range firing {
			if s.Labels["cluster"] != h.ns+"/"+release || s.Labels["reason"] == "e2e-monitoring" {
				return nil, fmt.Errorf("firing for a node sunk did not drain: %v", s)
			}
			nodes = append(nodes, s.Labels["node"])
		}
		return nodes, err
	}
	poll(t, time.Minute, "SunkSlurmNodeDrainedBySunk firing for compute-0 after the cordon", func() error {
		nodes, err := drainedBySunk()
		if err != nil || !slices.Contains(nodes, "compute-0") {
			return fmt.Errorf("firing for %v: %v", nodes, err)
		}
		return nil
	})
	h.setUnschedulable(t, node, false)
	poll(t, time.Minute, "SunkSlurmNodeDrainedBySunk over after the uncordon", func() error {
		if nodes, err := drainedBySunk(); err != nil || len(nodes) != 0 {
			return fmt.Errorf("firing for %v: %v", nodes, err)
		}
		return nil
	})

	// slurmctld hangs (its container frozen): the exporter cannot read the cluster through
	// slurmrestd and SunkSlurmUnreachable fires for it; thawed, the alert ends.
	unreachable := func() (bool, error) {
		firing, err := p.Firing("SunkSlurmUnreachable")
		for _, s := range firing {
			if s.Labels["cluster"] == h.ns+"/"+release {
				return true, err
			}
		}
		return false, err
	}
	frozen := time.Now()
	ctld := h.podOf(t, release, wellknown.ComponentController)
	thaw := h.Freeze(t, &ctld, render.ControllerContainer)
	poll(t, 2*time.Minute, "SunkSlurmUnreachable firing while slurmctld is frozen", func() error {
		if on, err := unreachable(); err != nil || !on {
			return fmt.Errorf("not firing: %v", err)
		}
		return nil
	})
	t.Logf("SunkSlurmUnreachable firing %s after slurmctld froze", time.Since(frozen).Round(100*time.Millisecond))
	thaw()
	poll(t, 2*time.Minute, "SunkSlurmUnreachable over once slurmctld runs again", func() error {
		if on, err := unreachable(); err != nil || on {
			return fmt.Errorf("still firing: %v", err)
		}
		return nil
	})
}

// alertRules writes the spec of the one PrometheusRule the sunk chart rendered, a Prometheus
// rule file, and returns its path.
func (h *helmEnv) alertRules(t *testing.T, dyn dynamic.Interface) string {
	t.Helper()
	rules, err := dyn.Resource(prometheusRules).Namespace(h.sunkNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules.Items) != 1 {
		t.Fatalf("%d PrometheusRules in %s, want the chart's one", len(rules.Items), h.sunkNS)
	}
	return promtest.RuleFile(t, rules.Items[0].Object["spec"])
}

// schedulerPod creates a pod for sunk-scheduler and returns it once it is bound.
func (h *helmEnv) schedulerPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod := busyboxPod(name, "sleep 3600")
	pod.Spec.SchedulerName = "sunk-scheduler"
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
	}
	if _, err := h.Clientset.CoreV1().Pods(h.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitPod(t, h.Clientset, h.ns, name, 3*time.Minute, func(p *corev1.Pod) (bool, error) {
		return p.Spec.NodeName != "" && p.Annotations[taintSlurmJob] != "", nil
	})
}

// promHas waits until expr has one series of value want.
func (h *helmEnv) promHas(t *testing.T, p *promtest.Server, expr string, want float64, what string) {
	t.Helper()
	poll(t, time.Minute, what, func() error {
		s, err := p.Query(expr)
		if err != nil {
			return err
		}
		if len(s) != 1 || s[0].Value != want {
			return fmt.Errorf("%s = %v, want one series of %v", expr, s, want)
		}
		return nil
	})
}

// metricsReaderToken is a token file for a ServiceAccount bound to the chart's metrics-reader
// ClusterRole, which kube-scheduler asks the API server about on every scrape of /metrics.
func (h *helmEnv) metricsReaderToken(t *testing.T) string {
	t.Helper()
	token := testenv.ServiceAccountToken(t, h.Clientset, h.ns, "prometheus", h.sunkRelease+"-metrics-reader", time.Hour)
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// installPrometheusOperatorCRDs installs the Prometheus Operator's ServiceMonitor and
// PrometheusRule kinds (their schemas left open: the test bed runs no Prometheus Operator to
// validate them) and removes them after the test's releases are gone (the first cleanups
// registered run last).
func installPrometheusOperatorCRDs(t *testing.T) {
	t.Helper()
	cl := testenv.Cluster(t)
	dyn, err := dynamic.NewForConfig(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx := context.Background()
	for _, kind := range []struct {
		gvr       schema.GroupVersionResource
		kind, one string
	}{{serviceMonitors, "ServiceMonitor", "servicemonitor"}, {prometheusRules, "PrometheusRule", "prometheusrule"}} {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": kind.gvr.Resource + "." + kind.gvr.Group},
			"spec": map[string]any{
				"group": kind.gvr.Group, "scope": "Namespaced",
				"names": map[string]any{"kind": kind.kind, "listKind": kind.kind + "List", "plural": kind.gvr.Resource, "singular": kind.one},
				"versions": []any{map[string]any{"name": kind.gvr.Version, "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		// One left by an interrupted run is the same definition: use it, and delete it at the end.
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = crds.Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}) })
		poll(t, time.Minute, kind.kind+" served", func() error {
			_, err := dyn.Resource(kind.gvr).Namespace("default").List(ctx, metav1.ListOptions{})
			return err
		})
	}
}
