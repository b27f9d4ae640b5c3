//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// workloadControllers starts installing the JobSet and LeaderWorkerSet controllers
// (hack/workload-controllers.sh install: each project's own chart from its Go module at the
// version pkg/wellknown/workloads.go reads, the manager as a pod, webhooks included) beside
// whatever the test does next; ready waits until their webhooks admit. A test bed that had them
// keeps them; else they are removed at the test's end.
func (h *helmEnv) workloadControllers(t *testing.T) (ready func()) {
	t.Helper()
	ctx := context.Background()
	had := true
	for _, ns := range []string{"jobset-system", "lws-system"} {
		if _, err := h.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			had = false
		}
	}
	path := filepath.Join(testenv.RepoRoot(), "hack", "workload-controllers.sh")
	if !had {
		t.Cleanup(func() {
			cmd := exec.Command(path, "uninstall")
			cmd.Env = append(os.Environ(), "KUBECONFIG="+h.Kubeconfig)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s uninstall: %v\n%s", path, err, out)
			}
		})
	}
	start := time.Now()
	var out bytes.Buffer
	cmd := exec.Command(path, "install")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.Kubeconfig)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var took time.Duration // written before done is sent, read after it is received
	go func() {
		err := cmd.Wait()
		took = time.Since(start)
		done <- err
	}()
	var err error
	waited := false
	wait := func() {
		if !waited {
			waited, err = true, <-done
		}
	}
	// Before the uninstall (cleanups run last first): a test that failed early still lets the
	// install end (its own timeouts bound it) before removing what it made.
	t.Cleanup(wait)
	return func() {
		t.Helper()
		waitStart := time.Now()
		wait()
		if err != nil {
			t.Fatalf("%s install: %v\n%s", path, err, out.String())
		}
		t.Logf("workload controllers installed in %s (beside the Slurm cluster's start), needed %s after it started: waited %s for them here; the script said:\n%s",
			took.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond), time.Since(waitStart).Round(100*time.Millisecond), strings.TrimSpace(out.String()))
	}
}

// workloadPodTemplate is the pod template of the workloads' members (YAML, indented by indent):
// small pods for sunk-scheduler in the partition (of NodeSet wide), packed (not exclusive) so
// that the gangs share the three machines' CPUs, allowed on the extra nodes.
func workloadPodTemplate(indent, partition string) string {
	tpl := fmt.Sprintf(`metadata:
  annotations: {%s: %s, %s: "false"}
spec:
  schedulerName: sunk-scheduler
  terminationGracePeriodSeconds: 0
  tolerations: [{key: %s, operator: Exists, effect: NoSchedule}]
  containers:
    - {name: c, image: %s, imagePullPolicy: Never, command: [/bin/sleep, "3600"], resources: {requests: {cpu: 10m, memory: 16Mi}}}
`, annotationPartition, partition, annotationExclusive, extraNodeTaint.Key, busyboxImage)
	return indent + strings.ReplaceAll(strings.TrimSuffix(tpl, "\n"), "\n", "\n"+indent) + "\n"
}

// replicatedJobYAML is a JobSet's replicated job (an item of spec.replicatedJobs, YAML): replicas
// Jobs of two pods each (parallelism and completions 2, no retry), workload pods in partition.
func replicatedJobYAML(name string, replicas int, partition string) string {
	return fmt.Sprintf(`    - name: %s
      replicas: %d
      template:
        spec:
          parallelism: 2
          completions: 2
          backoffLimit: 0
          template:
`, name, replicas) + workloadPodTemplate("            ", partition) + "              restartPolicy: Never\n"
}

// createYAML creates the object of the YAML in the test's namespace and deletes it (and what
// it owns) at the test's end.
func (e *operatorEnv) createYAML(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	u.SetNamespace(e.ns)
	if err := e.c.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), u, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	return u
}

// jobSetGangName is the gang sunk-scheduler makes of a JobSet pod (docs/scheduler.md, "Gangs"):
// its replicated job, and the JobSet's restart attempt once it restarted.
func jobSetGangName(p *corev1.Pod) string {
	g := "jobset/" + p.Labels[wellknown.JobSetLabelName] + "/" + p.Labels[wellknown.JobSetLabelReplicatedJob]
	if a := p.Labels[wellknown.JobSetLabelRestartAttempt]; a != "" && a != "0" {
		g += "/restart-" + a
	}
	return g
}

// workloadGangs (issue 43): the workloads ML teams write, made by their real controllers (the
// JobSet and LWS managers with their webhooks, workloadControllers), through sunk-scheduler on
// real Slurm and the three machines' kubelets. A JobSet of 2 replicated jobs, workers (2 Jobs
// of 2 pods) and driver (1 Job of 2 pods), is two gangs, one per replicated job
// (docs/scheduler.md, "Gangs"): exactly two Slurm jobs, one holding the four pods of workers'
// two Jobs, the other driver's two, and no other pod. A LeaderWorkerSet of size 3 is one Slurm job holding its three
// pods (the leader's group-index label written by LWS's pod webhook). Deleting one member of
// the group ends that job; LWS recreates the group, which gets a job of its own again.
func (h *helmEnv) workloadGangs(t *testing.T, login string) {
	t.Helper()
	ctx := context.Background()
	created := time.Now()
	js := h.createYAML(t, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train}
spec:
  replicatedJobs:
`+replicatedJobYAML("workers", 2, "wide")+replicatedJobYAML("driver", 1, "wide"))
	lws := h.createYAML(t, `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: serve}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 3
    workerTemplate:
`+workloadPodTemplate("      ", "wide"))

	// The JobSet: two gangs, of four and two, each bound to a job of its own.
	jobsetGangs := h.waitGangs(t, client.MatchingLabels{wellknown.JobSetLabelName: "train"}, 6, 2, jobSetGangName, nil)
	jobsetBound := time.Since(created)
	t.Logf("JobSet train: 6 pods bound and running %s after creation, gangs %v", jobsetBound.Round(100*time.Millisecond), jobsetGangs)
	for _, g := range []string{"jobset/train/workers", "jobset/train/driver"} {
		if jobsetGangs[g] == "" {
			t.Errorf("JobSet train: no gang %s among %v", g, jobsetGangs)
		}
	}
	h.gangJobsInSlurm(t, login, "jobset/train/", "wide", jobsetGangs)

	// The LeaderWorkerSet: one gang of three.
	lwsGang := func(p *corev1.Pod) string {
		return "leaderworkerset/serve/" + p.Labels[wellknown.LWSLabelGroupIndex]
	}
	lwsSel := client.MatchingLabels{wellknown.LWSLabelName: "serve"}
	group := h.waitGangs(t, lwsSel, 3, 1, lwsGang, nil)
	lwsBound := time.Since(created)
	t.Logf("LeaderWorkerSet serve: 3 pods bound and running %s after creation, gang %v", lwsBound.Round(100*time.Millisecond), group)
	h.gangJobsInSlurm(t, login, "leaderworkerset/serve/", "wide", group)
	leader := &corev1.Pod{}
	if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: "serve-0"}, leader); err != nil {
		t.Fatal(err)
	}
	if leader.Labels[wellknown.LWSLabelGroupIndex] != "0" || leader.Labels[wellknown.LWSLabelWorkerIndex] != "0" {
		t.Errorf("the leader serve-0's labels %v: want the group index and worker index 0 (LWS's pod webhook)", leader.Labels)
	}

	// The JobSet goes: its jobs end.
	if err := h.c.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	for _, job := range jobsetGangs {
		if state, _, _ := h.jobEnd(t, login, job, time.Minute); state != "CANCELLED" && state != "COMPLETED" {
			t.Errorf("JobSet train's job %s after the JobSet went: %s", job, state)
		}
	}

	// One member of the group goes: the group's job ends, the allocation is given back.
	oldUIDs := h.podUIDs(t, lwsSel)
	deleted := time.Now()
	if err := h.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "serve-0-1"}}); err != nil {
		t.Fatal(err)
	}
	job := group["leaderworkerset/serve/0"]
	if state, _, _ := h.jobEnd(t, login, job, time.Minute); state != "CANCELLED" && state != "COMPLETED" {
		t.Errorf("LeaderWorkerSet serve's job %s after a member went: %s", job, state)
	}
	jobEnded := time.Since(deleted)
	t.Logf("member serve-0-1 deleted → job %s ended within %s", job, jobEnded.Round(100*time.Millisecond))
	again := h.waitGangs(t, lwsSel, 3, 1, lwsGang, oldUIDs)
	if again["leaderworkerset/serve/0"] == job {
		t.Errorf("the recreated group runs in the old job %s", job)
	}
	regrouped := time.Since(deleted)
	t.Logf("LWS recreated the group: bound and running in job %s %s after the deletion", again["leaderworkerset/serve/0"], regrouped.Round(100*time.Millisecond))

	if err := h.c.Delete(ctx, lws, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if state, _, _ := h.jobEnd(t, login, again["leaderworkerset/serve/0"], time.Minute); state != "CANCELLED" && state != "COMPLETED" {
		t.Errorf("LeaderWorkerSet serve's job %s after the set went: %s", again["leaderworkerset/serve/0"], state)
	}
	t.Logf("bench: name=workload-gangs jobset_bound_s=%.1f lws_bound_s=%.1f member_gone_to_job_end_s=%.1f regroup_bound_s=%.1f step_s=%.1f",
		jobsetBound.Seconds(), lwsBound.Seconds(), jobEnded.Seconds(), regrouped.Seconds(), time.Since(created).Seconds())
}

// podUIDs are the UIDs of the selected pods of the test's namespace.
func (h *helmEnv) podUIDs(t *testing.T, sel client.MatchingLabels) []types.UID {
	t.Helper()
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace(h.ns), sel); err != nil {
		t.Fatal(err)
	}
	var uids []types.UID
	for _, p := range pods.Items {
		uids = append(uids, p.UID)
	}
	return uids
}

// waitGangs waits until the selected pods are n live pods (none of the UIDs not), all bound and
// running, in gangs of gangOf, and returns each gang's Slurm job. Every member of a gang must
// name the one job its binding recorded, and no job may be two gangs'. The members' bindings
// are separate API writes after Permit lets them all through, so a look between two of them
// sees a gang partly bound: that is waited for, and the spread of the members' PodScheduled
// times is logged.
func (h *helmEnv) waitGangs(t *testing.T, sel client.MatchingLabels, n, gangs int, gangOf func(*corev1.Pod) string, not []types.UID) map[string]string {
	t.Helper()
	var jobs map[string]string
	poll(t, 3*time.Minute, fmt.Sprintf("%d pods of %v bound and running in %d gangs", n, sel, gangs), func() error {
		var pods corev1.PodList
		if err := h.c.List(context.Background(), &pods, client.InNamespace(h.ns), sel); err != nil {
			return err
		}
		members := map[string][]corev1.Pod{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && !slices.Contains(not, p.UID) {
				members[gangOf(&p)] = append(members[gangOf(&p)], p)
			}
		}
		jobs = map[string]string{}
		total := 0
		for g, ps := range members {
			total += len(ps)
			for _, p := range ps {
				if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
					return fmt.Errorf("gang %s: pod %s bound to %q, %s", g, p.Name, p.Spec.NodeName, p.Status.Phase)
				}
				j := p.Annotations[taintSlurmJob]
				if j == "" || (jobs[g] != "" && jobs[g] != j) {
					return fmt.Errorf("gang %s: pod %s in job %q, another in %q", g, p.Name, j, jobs[g])
				}
				jobs[g] = j
			}
		}
		if total != n || len(members) != gangs {
			return fmt.Errorf("%d pods in gangs %v, want %d in %d", total, jobs, n, gangs)
		}
		return nil
	})
	h.logBindSpread(t, sel, not)
	seen := map[string]string{}
	for g, j := range jobs {
		if seen[j] != "" {
			t.Errorf("gangs %s and %s share job %s", seen[j], g, j)
		}
		seen[j] = g
	}
	return jobs
}

// gangJobsInSlurm checks Slurm's side: the live jobs named for gangs under prefix are exactly
// the gangs' jobs, one each, running in the partition.
func (h *helmEnv) gangJobsInSlurm(t *testing.T, login, prefix, partition string, jobs map[string]string) {
	t.Helper()
	name := "sunk-gang-" + h.ns + "-" + prefix
	var got, want []string
	for _, l := range strings.Split(strings.TrimSpace(h.mustSh(t, login, "squeue -h -o '%i|%j|%T|%P'")), "\n") {
		if f := strings.Split(l, "|"); len(f) == 4 && strings.HasPrefix(f[1], name) {
			got = append(got, f[0]+" "+strings.TrimPrefix(f[1], "sunk-gang-"+h.ns+"-")+" "+f[2]+" "+f[3])
		}
	}
	for g, j := range jobs {
		want = append(want, j+" "+g+" RUNNING "+partition)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("Slurm's jobs for %s*: %q, want %q", name, got, want)
	}
}

// logBindSpread logs, per Slurm job, how far apart its pods' PodScheduled times lie (seconds,
// the API's resolution).
func (h *helmEnv) logBindSpread(t *testing.T, sel client.MatchingLabels, not []types.UID) {
	t.Helper()
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace(h.ns), sel); err != nil {
		t.Fatal(err)
	}
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || slices.Contains(not, p.UID) {
			continue
		}
		j := p.Annotations[taintSlurmJob]
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionTrue {
				continue
			}
			at := c.LastTransitionTime.Time
			if f, ok := first[j]; !ok || at.Before(f) {
				first[j] = at
			}
			if at.After(last[j]) {
				last[j] = at
			}
		}
	}
	for j := range first {
		t.Logf("job %s: its pods bound within %s", j, last[j].Sub(first[j]))
	}
}
