//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// badSpecsChangeNothing sends bad SlurmCluster and NodeSet specs to the live cluster while a job
// runs: the webhook of the sunk release refuses each, naming its field; a value only Slurm can
// refuse (MaxJobCount=abc) is admitted, refused by the operator's Slurm check and reported in
// ConfigApplied with Slurm's own message; slurmctld is neither restarted nor reconfigured by any
// of them and the job keeps running; a good extraConf change then reaches slurmctld by
// reconfigure, without a restart.
func (h *helmEnv) badSpecsChangeNothing(t *testing.T, login string) {
	t.Helper()
	job := strings.TrimSpace(h.mustSh(t, login, testenv.AsUser("sbatch --parsable -J keeps-running --wrap 'sleep 600'")))
	// Uninstalling waits for running jobs: the job ends here, whatever happens.
	defer func() { _, _ = h.sh(t, login, "login", "scancel "+job) }()
	poll(t, 2*time.Minute, "job "+job+" running", func() error {
		return h.jobIs(t, login, job, "RUNNING")
	})
	ctld := h.podOf(t, h.slurmRelease, wellknown.ComponentController)
	confBefore := h.appliedSlurmConf(t)

	refused := []struct {
		name   string
		mutate func(sc *sunkv1.SlurmCluster)
		want   string
	}{
		{"a key sunk keeps", func(sc *sunkv1.SlurmCluster) { sc.Spec.Controller.ExtraConf = "AuthType = auth/none" }, "spec.controller.extraConf"},
		{"SlurmUser=root", func(sc *sunkv1.SlurmCluster) { sc.Spec.Controller.ExtraConf = "SlurmUser=root" }, "spec.controller.extraConf"},
		{"an unknown key", func(sc *sunkv1.SlurmCluster) { sc.Spec.Controller.ExtraConf = "BogusKey=1" }, "BogusKey is not a slurm.conf key"},
		{"a partition's node set injecting a line", func(sc *sunkv1.SlurmCluster) {
			sc.Spec.Partitions[0].NodeSets = []string{"compute\nAuthType=auth/none"}
		}, "spec.partitions[0].nodeSets[0]"},
		{"job_submit.lua whose top level fails", func(sc *sunkv1.SlurmCluster) {
			sc.Spec.JobSubmitLua = "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\nfunction slurm_job_modify(j, jr, p, u) return slurm.SUCCESS end\nundefined_function()\n"
		}, "spec.jobSubmitLua"},
		{"job_submit.lua without slurm_job_modify", func(sc *sunkv1.SlurmCluster) {
			sc.Spec.JobSubmitLua = "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\n"
		}, "spec.jobSubmitLua"},
	}
	for _, c := range refused {
		sc := &sunkv1.SlurmCluster{}
		err := h.tryUpdate(types.NamespacedName{Namespace: h.ns, Name: h.slurmRelease}, sc, func() { c.mutate(sc) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SlurmCluster with %s: %v, want refused naming %q", c.name, err, c.want)
		}
	}
	ns := &sunkv1.NodeSet{}
	err := h.tryUpdate(types.NamespacedName{Namespace: h.ns, Name: "compute"}, ns, func() {
		ns.Spec.Env = append(ns.Spec.Env, corev1.EnvVar{Name: "SLURMD_CONF", Value: "/tmp/mine.conf"})
	})
	if err == nil || !strings.Contains(err.Error(), "spec.env") {
		t.Errorf("NodeSet overriding SLURMD_CONF: %v, want refused naming spec.env", err)
	}

	// Admitted, and refused by Slurm's own parser in the operator's check pod.
	sc := &sunkv1.SlurmCluster{}
	h.update(t, h.clusterRef(sc), func() { sc.Spec.Controller.ExtraConf = "MaxJobCount=abc" })
	poll(t, 2*time.Minute, "ConfigApplied=False SlurmRejectedConfig", func() error {
		c := meta.FindStatusCondition(h.cluster(t, h.slurmRelease).Status.Conditions, sunkv1.ConditionConfigApplied)
		if c == nil || c.Reason != "SlurmRejectedConfig" || !strings.Contains(c.Message, "MaxJobCount") {
			return fmt.Errorf("ConfigApplied = %+v", c)
		}
		t.Logf("ConfigApplied: %s: %s", c.Reason, c.Message)
		return nil
	})
	if after := h.appliedSlurmConf(t); after != confBefore || strings.Contains(after, "MaxJobCount") {
		t.Errorf("slurm.conf was applied for a configuration Slurm refused:\n%s", after)
	}
	if err := h.jobIs(t, login, job, "RUNNING"); err != nil {
		t.Errorf("after the bad specs: %v", err)
	}
	h.sameController(t, ctld)

	// A good change is checked, applied by reconfigure, and the job runs on.
	h.update(t, h.clusterRef(sc), func() { sc.Spec.Controller.ExtraConf = "MinJobAge=600" })
	poll(t, 3*time.Minute, "MinJobAge=600 in slurmctld", func() error {
		out, err := h.sh(t, login, "login", "scontrol show config | grep -w MinJobAge")
		if err != nil || !strings.Contains(out, "600 sec") {
			return fmt.Errorf("scontrol: %v %q", err, out)
		}
		return nil
	})
	// The operator writes the condition after the reconfigure that slurmctld already shows,
	// at the end of the same pass: wait for that write, not only for slurmctld.
	poll(t, time.Minute, "ConfigApplied=True after a good change", func() error {
		if c := meta.FindStatusCondition(h.cluster(t, h.slurmRelease).Status.Conditions, sunkv1.ConditionConfigApplied); c == nil || c.Status != "True" {
			return fmt.Errorf("ConfigApplied = %+v", c)
		}
		return nil
	})
	if err := h.jobIs(t, login, job, "RUNNING"); err != nil {
		t.Errorf("after the good change: %v", err)
	}
	h.sameController(t, ctld)
}

// clusterRef is sc keyed as the release's SlurmCluster, for update.
func (h *helmEnv) clusterRef(sc *sunkv1.SlurmCluster) *sunkv1.SlurmCluster {
	sc.Namespace, sc.Name = h.ns, h.slurmRelease
	return sc
}

// tryUpdate is update that returns the write's error instead of failing the test: a refusal is
// what the caller expects.
func (h *helmEnv) tryUpdate(key types.NamespacedName, o client.Object, mutate func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.c.Get(context.Background(), key, o); err != nil {
			return err
		}
		mutate()
		return h.c.Update(context.Background(), o)
	})
}

// jobIs says whether Slurm reports the job in state.
func (h *helmEnv) jobIs(t *testing.T, login, job, state string) error {
	out, err := h.sh(t, login, "login", "squeue -h -j "+job+" -o %T")
	if err != nil || strings.TrimSpace(out) != state {
		return fmt.Errorf("job %s: squeue %v %q, want %s", job, err, out, state)
	}
	return nil
}

// appliedSlurmConf is slurm.conf as the operator last applied it: the config ConfigMap's.
func (h *helmEnv) appliedSlurmConf(t *testing.T) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: h.ns, Name: clusternames.For(h.cluster(t, h.slurmRelease), "").Config}, cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["slurm.conf"]
}

// sameController fails unless slurmctld's pod is the one given, never restarted since.
func (h *helmEnv) sameController(t *testing.T, before corev1.Pod) {
	t.Helper()
	after := h.podOf(t, h.slurmRelease, wellknown.ComponentController)
	if after.UID != before.UID || after.Status.ContainerStatuses[0].RestartCount != before.Status.ContainerStatuses[0].RestartCount {
		t.Errorf("slurmctld was restarted: pod %s restarts %d, before %s restarts %d", after.UID,
			after.Status.ContainerStatuses[0].RestartCount, before.UID, before.Status.ContainerStatuses[0].RestartCount)
	}
}
