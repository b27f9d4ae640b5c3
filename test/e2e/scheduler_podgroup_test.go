//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// podGroupCRD installs the PodGroup CRD of scheduler-plugins v0.34.7 (the file the scheduler's
// integration tests install, from that module's manifests) until the test ends. sunk-scheduler
// reads PodGroups only where the API serves them: installed before the scheduler starts, it is
// read from the start.
func (h *helmEnv) podGroupCRD(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "scheduler", "test", "integration", "testdata", "scheduler-plugins-v0.34.7-podgroups.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &crd.Object); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(context.Background(), crd); err != nil {
		t.Fatalf("creating the PodGroup CRD: %v", err)
	}
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), crd) })
}

// podGroupOnMachines (issue 43): a scheduler-plugins PodGroup of minMember 3 and four pods
// labelled for it, no sunk annotation: three are bound together in one Slurm job and run on the
// machines' kubelets, the fourth stays unbound and is told why; deleting a bound member gives
// the whole allocation back (the job ends, the other two are evicted) and the fourth waits for
// a complete group.
func (h *helmEnv) podGroupOnMachines(t *testing.T, login string) {
	t.Helper()
	ctx := context.Background()
	created := time.Now()
	h.createYAML(t, `apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train}
spec: {minMember: 3}
`)
	sel := client.MatchingLabels{wellknown.PodGroupLabel: "train"}
	t.Cleanup(func() { _ = h.c.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(h.ns), sel) })
	names := []string{"pg-a", "pg-b", "pg-c", "pg-d"}
	for _, name := range names {
		h.createSmallPod(t, name, map[string]string{wellknown.PodGroupLabel: "train"}, map[string]string{annotationPartition: "wide", annotationExclusive: "false"})
	}

	// Three run in one job (the pods already given to a job first, then by name: a, b, c), d waits.
	var job string
	poll(t, 3*time.Minute, "three of the PodGroup's pods running in one job, the fourth told why it waits", func() error {
		job = ""
		for _, name := range names[:3] {
			p, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			j := p.Annotations[taintSlurmJob]
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || j == "" || (job != "" && j != job) {
				return fmt.Errorf("pod %s on %q, %s, job %q (another member's %q)", name, p.Spec.NodeName, p.Status.Phase, j, job)
			}
			job = j
		}
		d, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, names[3], metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s beyond minMember 3", d.Name, d.Spec.NodeName)
		}
		if c := podScheduledMessage(d); !strings.Contains(c, "gang podgroup/train has 4 pods for minMember 3") {
			return fmt.Errorf("pod %s: PodScheduled says %q", d.Name, c)
		}
		return nil
	})
	bound := time.Since(created)
	if out := strings.TrimSpace(h.mustSh(t, login, "squeue -h -j "+job+" -o '%T %j'")); out != "RUNNING sunk-gang-"+h.ns+"-podgroup/train" {
		t.Errorf("the PodGroup's job %s: %q, want it RUNNING and named for the gang", job, out)
	}

	// A bound member goes: the whole allocation is given back.
	deleted := time.Now()
	if err := h.Clientset.CoreV1().Pods(h.ns).Delete(ctx, names[1], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if state, _, _ := h.jobEnd(t, login, job, time.Minute); state != "CANCELLED" && state != "COMPLETED" {
		t.Errorf("the PodGroup's job %s after a member went: %s", job, state)
	}
	ended := time.Since(deleted)
	poll(t, time.Minute, "the other members evicted, the fourth waiting for a complete group", func() error {
		for _, name := range []string{names[0], names[2]} {
			p, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				return fmt.Errorf("pod %s still running", name)
			}
		}
		d, err := h.Clientset.CoreV1().Pods(h.ns).Get(ctx, names[3], metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := podScheduledMessage(d); d.Spec.NodeName != "" || !strings.Contains(c, "gang podgroup/train has 1 of 3 pods") {
			return fmt.Errorf("pod %s on %q: PodScheduled says %q", d.Name, d.Spec.NodeName, c)
		}
		return nil
	})
	t.Logf("bench: name=podgroup-min-member bound_s=%.1f member_gone_to_job_end_s=%.1f step_s=%.1f",
		bound.Seconds(), ended.Seconds(), time.Since(created).Seconds())
}

// podScheduledMessage is the message of the pod's PodScheduled condition.
func podScheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}
