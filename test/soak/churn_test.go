//go:build soak

// Churn: scaling, cordons, a person's drain, sunk-scheduler pods and the kills.

package soak

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
)

// scale sets the NodeSet's replicas as a user does (helm upgrade of the demo release) and waits
// until Slurm has exactly the nodes compute-0..n-1, all registered and up, and as many compute
// pods are Ready. Scale-in drains and waits for jobs (the NodeSet controller); the job table says
// whether any job was killed.
func (s *soak) scale(n int, timeout time.Duration) {
	s.logf("scaling NodeSet compute to %d", n)
	// Helm's --set on a list element replaces the whole list: name and mode go with the count,
	// and the demo's autoscaled NodeSet with them.
	s.helm("upgrade", clusterName, "charts/slurm", "-n", slurmNS, "--reuse-values",
		"--set", fmt.Sprintf("nodeSets[0].name=compute,nodeSets[0].mode=Replicas,nodeSets[0].replicas=%d,%s,%s", n, computeSpread, burstNodeSet))
	d := s.poll(timeout, 2*time.Second, fmt.Sprintf("%d Slurm nodes up", n), func() error {
		nodes, err := s.nodes()
		if err != nil {
			return err
		}
		up := 0
		for _, nd := range nodes {
			i, err := strconv.Atoi(strings.TrimPrefix(nd.Name, "compute-"))
			if err != nil || i >= n {
				continue
			}
			if !nd.NotResponding && !strings.HasPrefix(nd.State, "down") && !strings.HasPrefix(nd.State, "unk") && !strings.HasPrefix(nd.State, "fail") && nd.State != "future" {
				up++
			}
		}
		if up != n || len(nodes) != n {
			return fmt.Errorf("%d of %d Slurm nodes up, %d listed", up, n, len(nodes))
		}
		pods, err := s.pods(computeC)
		if err != nil {
			return err
		}
		r := 0
		for i := range pods {
			if ready(&pods[i]) && pods[i].DeletionTimestamp.IsZero() {
				r++
			}
		}
		if r != n || len(pods) != n {
			return fmt.Errorf("%d of %d compute pods Ready, %d exist", r, n, len(pods))
		}
		return nil
	})
	s.logf("NodeSet at %d after %s", n, d.Round(time.Second))
}

// cordon cordons every machine that hosts a compute pod (the demo spreads them over the test
// bed's machines), or uncordons those it cordoned.
func (s *soak) cordon(on bool) error {
	reason := any(nil)
	if on {
		reason = "soak: cordon loop"
		pods, err := s.pods(computeC)
		if err != nil {
			return err
		}
		var machines []string
		for _, p := range pods {
			if m := p.Spec.NodeName; m != "" && !slices.Contains(machines, m) {
				machines = append(machines, m)
			}
		}
		s.mu.Lock()
		s.cordoned = machines
		s.mu.Unlock()
	}
	s.mu.Lock()
	machines := slices.Clone(s.cordoned)
	s.mu.Unlock()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on},
		"metadata": map[string]any{"annotations": map[string]any{"sunk.dev/cordon-reason": reason}}})
	var errs []error
	for _, m := range machines {
		if _, err := s.cs.CoreV1().Nodes().Patch(s.ctx, m, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// cordonCycle cordons the machines that host compute pods, waits for the syncer's
// `k8s: node cordoned` drains, uncordons and waits until they are lifted.
func (s *soak) cordonCycle() {
	w := window{what: "cordon", start: time.Now()}
	s.mu.Lock()
	s.cordons = append(s.cordons, w)
	idx := len(s.cordons) - 1
	s.mu.Unlock()
	if err := s.cordon(true); err != nil {
		s.t.Fatal(err)
	}
	// cordoned counts the nodes the cordon drained; a node drained by Slurm or a person
	// before counts as drained too (the syncer leaves such a drain and its reason alone) but
	// is not the cordon's to lift.
	var others int
	cordoned := func() (int, int, error) {
		nodes, err := s.nodes()
		if err != nil {
			return 0, 0, err
		}
		k, o := 0, 0
		for _, n := range nodes {
			switch {
			case n.Drained() && strings.HasPrefix(n.Reason, "k8s:") && strings.Contains(n.Reason, "cordon"):
				k++
			case n.Drained() && !strings.HasPrefix(n.Reason, "k8s:"):
				o++
			}
		}
		others = o
		return k, len(nodes), nil
	}
	first := s.poll(90*time.Second, time.Second, "a k8s: node cordoned drain", func() error {
		k, _, err := cordoned()
		if err == nil && k == 0 {
			err = fmt.Errorf("no node drained yet")
		}
		return err
	})
	var k, total int
	all := s.poll(90*time.Second, time.Second, "every node drained by the cordon", func() error {
		var err error
		k, total, err = cordoned()
		if err == nil && k+others < total {
			err = fmt.Errorf("%d of %d drained (%d already drained by Slurm or a person)", k, total, others)
		}
		return err
	})
	if err := s.cordon(false); err != nil {
		s.t.Fatal(err)
	}
	lifted := s.poll(90*time.Second, time.Second, "cordon drains lifted", func() error {
		k, _, err := cordoned()
		if err == nil && k > 0 {
			err = fmt.Errorf("%d nodes still drained by the cordon", k)
		}
		return err
	})
	s.mu.Lock()
	s.cordons[idx].end = time.Now()
	s.mu.Unlock()
	s.logf("cordon: first drain %s, all %d drained %s, lifted %s after the uncordon",
		first.Round(100*time.Millisecond), total, all.Round(100*time.Millisecond), lifted.Round(100*time.Millisecond))
	s.maxFigure("cordon_first_drain_s", first.Seconds())
	s.maxFigure("cordon_all_drained_s", all.Seconds())
	s.maxFigure("uncordon_lifted_s", lifted.Seconds())
}

func (s *soak) maxFigure(name string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.figures[name]; !ok || v > old {
		s.figures[name] = v
	}
}

// personDrain is an admin's `scontrol update state=drain` and resume: it must reach the pod's
// annotation (Slurm → Kubernetes) and the syncer must leave a person's drain alone.
func (s *soak) personDrain() {
	podState := func() string {
		p, err := s.cs.CoreV1().Pods(slurmNS).Get(s.ctx, personNode, metav1.GetOptions{})
		if err != nil {
			return "error: " + err.Error()
		}
		return p.Annotations["slurm.sunk.dev/state"]
	}
	if out, err := s.login("scontrol update nodename=" + personNode + " state=drain reason='soak: a person drains it'"); err != nil {
		s.t.Fatalf("scontrol drain: %v %s", err, out)
	}
	d := s.poll(60*time.Second, 200*time.Millisecond, "person's drain on the pod", func() error {
		if st := podState(); !strings.Contains(st, "drain") {
			return fmt.Errorf("pod %s state %q", personNode, st)
		}
		return nil
	})
	// The syncer must not lift a person's drain: it is still there two samples later.
	held := time.Now()
	for time.Since(held) < 2*samplePeriod {
		nodes, err := s.nodes()
		if err == nil {
			for _, n := range nodes {
				if n.Name == personNode && !n.Drained() {
					s.t.Errorf("%s lost the person's drain: %+v", personNode, n)
				}
			}
		}
		time.Sleep(2 * time.Second)
	}
	if out, err := s.login("scontrol update nodename=" + personNode + " state=resume"); err != nil {
		s.t.Fatalf("scontrol resume: %v %s", err, out)
	}
	r := s.poll(60*time.Second, 200*time.Millisecond, "resume on the pod", func() error {
		if st := podState(); st == "" || strings.Contains(st, "drain") {
			return fmt.Errorf("pod %s state %q", personNode, st)
		}
		return nil
	})
	s.logf("person drain: on the pod after %s, resume after %s", d.Round(100*time.Millisecond), r.Round(100*time.Millisecond))
	s.maxFigure("person_drain_to_pod_s", d.Seconds())
	s.maxFigure("person_resume_to_pod_s", r.Seconds())
}

var schedRound int

// schedulerPods creates plain pods for sunk-scheduler, one after the other: each until it is
// bound and running with a Slurm job, then deleted, until its job ended (CANCELLED: the soak's
// own cancel). One at a time because the local cluster has one Kubernetes node and sunk-scheduler
// locks a node (taint sunk.dev/slurm-job) for the one job whose pod runs there: a second pod
// waits for the first one's lock.
func (s *soak) schedulerPods() {
	for i := 0; i < 2; i++ {
		schedRound++
		s.schedulerPod(fmt.Sprintf("soak-sched-%d", schedRound))
	}
}

func (s *soak) schedulerPod(name string) {
	core := s.cs.CoreV1().Pods(slurmNS)
	grace := int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sunk.dev/soak": "true"}},
		Spec: corev1.PodSpec{
			SchedulerName: "sunk-scheduler", RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: busybox, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
		},
	}
	if _, err := core.Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = core.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	var job string
	d := s.poll(3*time.Minute, time.Second, "sunk-scheduler pod "+name+" running", func() error {
		p, err := core.Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		job = p.Annotations["sunk.dev/slurm-job"]
		if p.Status.Phase != corev1.PodRunning || job == "" {
			return fmt.Errorf("pod %s: node %q phase %s job %q", name, p.Spec.NodeName, p.Status.Phase, job)
		}
		return nil
	})
	s.mu.Lock()
	s.cancelled[job] = "its sunk-scheduler pod was deleted"
	s.mu.Unlock()
	if err := core.Delete(s.ctx, name, metav1.DeleteOptions{}); err != nil {
		s.t.Fatal(err)
	}
	g := s.poll(2*time.Minute, time.Second, "sunk-scheduler pod "+name+" gone and its job ended", func() error {
		if _, err := core.Get(s.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s still there (%v)", name, err)
		}
		out, err := s.login("scontrol -o show job " + job)
		if err != nil {
			return err
		}
		jobs := ParseJobs(out)
		s.trackJobs(jobs, time.Now())
		if len(jobs) != 1 || !jobs[0].Terminal() {
			return fmt.Errorf("job %s: %v", job, jobs)
		}
		return nil
	})
	s.logf("sunk-scheduler pod %s: running with job %s after %s; deleted → job ended in %s", name, job,
		d.Round(100*time.Millisecond), g.Round(100*time.Millisecond))
	s.maxFigure("sched_pod_running_s", d.Seconds())
	s.maxFigure("sched_delete_to_job_end_s", g.Seconds())
}

// answersHTTP reports whether url answers HTTP at all (any status but the terminator's 502,
// which says slurmrestd behind it does not), verified with cfg for https.
func answersHTTP(url string, cfg *tls.Config) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusBadGateway {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// restTLS is how the components reach the demo cluster's slurmrestd: https verified with the
// cluster's CA and the Service's name (spec.tls, the default), or plain HTTP without its Secret.
func (s *soak) restTLS() (string, *tls.Config, error) {
	n := clusternames.For(&sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: slurmNS, Name: clusterName}}, "")
	sec, err := s.cs.CoreV1().Secrets(slurmNS).Get(s.ctx, n.TLSSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "http", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	cfg, err := clustertls.ClientConfig(slurmNS+"/"+clusterName, n.ServerName(n.RestAPI), clustertls.StaticRoots(sec.Data[clustertls.CACertKey]))
	return "https", cfg, err
}

// kill SIGKILLs the component's process (found through its container's cgroup on this host),
// or for slurmctld SIGSTOPs it (a hang), and waits until a new process runs and its pod is
// Ready; the kill window lasts one sample period longer.
func (s *soak) kill(c component) {
	pid, pod, err := s.pid(c)
	if err != nil {
		s.t.Fatalf("kill %s: %v", c.name, err)
	}
	w := window{what: "kill " + c.name, start: time.Now()}
	s.mu.Lock()
	s.windows = append(s.windows, w)
	idx := len(s.windows) - 1
	s.mu.Unlock()
	sig := syscall.SIGKILL
	if c.name == "slurmctld" {
		// slurmctld hangs rather than dies (Slurm 24.11.5 in a reconfigure, a backup in a
		// hand-back: docs/slurmcluster.md): a stopped process answers nothing, and only
		// kubelet's liveness probe brings it back, by the SIGKILL of a crash.
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(pid, sig); err != nil {
		s.t.Fatalf("kill -%s %d (%s): %v", unix.SignalName(sig), pid, c.name, err)
	}
	s.logf("%s %s (pid %d, pod %s)", unix.SignalName(sig), c.name, pid, pod.Name)
	d := s.poll(5*time.Minute, 500*time.Millisecond, c.name+" back and Ready", func() error {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !zombie(string(st)) {
			return fmt.Errorf("pid %d still alive", pid)
		}
		np, p, err := s.pid(c)
		if err != nil {
			return err
		}
		if np == pid {
			return fmt.Errorf("pid %d still there", pid)
		}
		if !ready(p) {
			return fmt.Errorf("pod %s not Ready", p.Name)
		}
		if c.name == "slurmrestd" {
			// Ready may still be the old process's (s6 restarts slurmrestd inside the running
			// container, and the probe has not failed yet): back means answering HTTP again,
			// through its Service as the components reach it (the pod's own IP answered ~8 s
			// before the Service did).
			svc, err := s.cs.CoreV1().Services(slurmNS).Get(s.ctx, "demo-restapi", metav1.GetOptions{})
			if err != nil {
				return err
			}
			scheme, cfg, err := s.restTLS()
			if err != nil {
				return err
			}
			if err := answersHTTP(fmt.Sprintf("%s://%s:6820/openapi/v3", scheme, svc.Spec.ClusterIP), cfg); err != nil {
				return fmt.Errorf("slurmrestd does not answer through its Service yet: %v", err)
			}
		}
		if c.name == "syncer" {
			// Ready says the process runs; it syncs once it holds the leader Lease (the killed
			// one's expires after the chart's leaderElectionTimings.leaseDuration) and has read
			// Slurm: its readable gauge says both.
			series, _, err := s.scrape(c)
			if err != nil {
				return err
			}
			for _, se := range series {
				if se.Name == "sunk_syncer_slurm_state_readable" && se.Value == 1 {
					return nil
				}
			}
			return fmt.Errorf("the new syncer does not sync yet (no readable cluster)")
		}
		if c.name == "slurmctld" {
			// Ready says the process runs; it serves once it has recovered its state and
			// heard from its nodes, which a client sees as `scontrol ping` answering UP.
			if out, err := s.login("scontrol ping"); err != nil || !strings.Contains(out, "is UP") {
				return fmt.Errorf("slurmctld does not answer yet: %s %v", oneLine(out), err)
			}
		}
		return nil
	})
	now := time.Now()
	s.mu.Lock()
	// A request sent while the component was down may still time out after it is back: the
	// window lasts one client timeout and one sample longer.
	s.windows[idx].end = now.Add(samplePeriod + clientTimeout)
	s.lastKillAt = now
	s.figures["recover_"+c.name+"_s"] = d.Seconds()
	s.mu.Unlock()
	s.logf("%s back and Ready %s after %s", c.name, d.Round(100*time.Millisecond), unix.SignalName(sig))
}
