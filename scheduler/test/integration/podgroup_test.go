//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

var podGroups = schema.GroupVersionResource{Group: wellknown.PodGroupGroup, Version: wellknown.PodGroupVersion, Resource: wellknown.PodGroupResource}

// TestPodGroupMinMember: four pods labelled for a scheduler-plugins PodGroup (no sunk
// annotation), created before it, wait for it; the PodGroup of minMember 3 then makes them one
// 3-node Slurm job for three of them, bound together, and the fourth waits, told why.
// Deleting a bound member gives back the whole allocation: the job is cancelled, the other
// members are evicted, the nodes unlocked, and the fourth waits for a complete group.
func TestPodGroupMinMember(t *testing.T) {
	e := setup(t)
	e.installCRDs(filepath.Join("testdata", "scheduler-plugins-v0.34.7-podgroups.yaml"))
	e.startScheduler("")
	const jobName = "sunk-gang-" + testNS + "-podgroup/train"
	member := func(p *v1.Pod) { p.Labels = map[string]string{wellknown.PodGroupLabel: "train"} }
	names := []string{"train-a", "train-b", "train-c", "train-d"}
	for _, name := range names {
		e.createPod(name, member)
	}
	e.eventually("the pods wait for their PodGroup", 30*time.Second, func() (bool, string) {
		c := scheduledCondition(e.getPod(names[0]))
		return strings.Contains(c, "waiting for PodGroup "+testNS+"/train"), c
	})
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": podGroups.GroupVersion().String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": "train", "namespace": testNS},
		"spec":     map[string]any{"minMember": int64(3)},
	}}
	if _, err := e.dyn.Resource(podGroups).Namespace(testNS).Create(e.ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var job *slurm.Job
	var nodes []string
	for _, name := range names[:3] {
		b := e.waitBound(name, 120*time.Second)
		j := e.jobOfPod(b)
		if job == nil {
			job = j
		}
		if j.ID != job.ID {
			t.Fatalf("members in different jobs: %d and %d", job.ID, j.ID)
		}
		nodes = append(nodes, b.Spec.NodeName)
	}
	slices.Sort(nodes)
	if job.NodeCount != 3 || job.Name != jobName || len(slices.Compact(slices.Clone(nodes))) != 3 {
		t.Fatalf("job %d %q on %s (%d nodes); pods bound to %v", job.ID, job.Name, job.Nodes, job.NodeCount, nodes)
	}
	e.eventually(names[3]+" waits beyond minMember", 30*time.Second, func() (bool, string) {
		got := e.getPod(names[3])
		c := scheduledCondition(got)
		return got.Spec.NodeName == "" && strings.Contains(c, "gang podgroup/train has 4 pods for minMember 3"), c
	})
	if live := liveJobs(e.jobsNamed(jobName)); len(live) != 1 {
		t.Fatalf("the PodGroup has live jobs %v, want only %d", live, job.ID)
	}

	e.deletePod(names[1])
	e.waitJobState(job.ID, 30*time.Second, "CANCELLED")
	for _, name := range []string{names[0], names[2]} {
		e.eventually(name+" evicted", 30*time.Second, func() (bool, string) {
			got, err := e.cs.CoreV1().Pods(testNS).Get(e.ctx, name, metav1.GetOptions{})
			return err != nil || got.DeletionTimestamp != nil, "not deleting"
		})
	}
	e.eventually(names[3]+" waits for a complete group", 30*time.Second, func() (bool, string) {
		got := e.getPod(names[3])
		c := scheduledCondition(got)
		return got.Spec.NodeName == "" && strings.Contains(c, "gang podgroup/train has 1 of 3 pods"), c
	})
	if live := liveJobs(e.jobsNamed(jobName)); len(live) != 0 {
		t.Errorf("the PodGroup has live jobs %v after giving its allocation back", live)
	}
	e.eventually("the nodes unlocked", 30*time.Second, func() (bool, string) {
		for _, host := range e.hostOf {
			if taint := e.nodeTaint(host); taint != "" {
				return false, fmt.Sprintf("node %s locked: %s", host, taint)
			}
		}
		return true, ""
	})
}

// installCRDs installs CRDs into the test's apiserver and waits until they are served.
func (e *env) installCRDs(paths ...string) {
	e.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		e.t.Fatalf("installing %v: %v", paths, err)
	}
}

// liveJobs are the ids of jobs that have not finished.
func liveJobs(jobs []slurm.Job) []uint32 {
	var ids []uint32
	for _, j := range jobs {
		if !finished(&j) {
			ids = append(ids, j.ID)
		}
	}
	return ids
}
