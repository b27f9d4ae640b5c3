//go:build integration

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// checkPod waits for the cluster's one config check pod.
func (h *harness) checkPod(t *testing.T, cluster string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, "a config check pod", func() error {
		var pods corev1.PodList
		if err := h.c.List(context.Background(), &pods, client.InNamespace(h.ns),
			client.MatchingLabels{wellknown.LabelCluster: cluster, wellknown.LabelComponent: wellknown.ComponentConfigCheck}); err != nil {
			return err
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			return fmt.Errorf("%d check pods waiting", len(live))
		}
		pod = &live[0]
		return nil
	})
	return pod
}

// finish plays the kubelet: the check pod's container ends with the exit code and message.
func (h *harness) finish(t *testing.T, p *corev1.Pod, code int32, msg string) {
	t.Helper()
	p.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		p.Status.Phase = corev1.PodFailed
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "check", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}
	if err := h.c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// TestSlurmConfigCheck: with the operator's --slurm-config-check, a configuration is applied
// only once Slurm's parser (the check pod) accepted it; one Slurm refuses leaves the running
// configuration in place, with Slurm's message in ConfigApplied.
func TestSlurmConfigCheck(t *testing.T) {
	h := startOperator(t, startAPI(t), func(r *slurmcluster.Reconciler) { r.SlurmConfigCheck = true })
	ctx := context.Background()
	sc := newCluster(h.ns, "cc")
	sc.Spec.Prolog = nil
	if err := h.c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}

	// The first configuration waits for its check, then is applied.
	p := h.checkPod(t, "cc")
	// The reconciler creates the check pod before it writes the condition: a loaded machine
	// shows the pod first.
	eventually(t, "ConfigApplied CheckingConfig while the check pod runs", func() error {
		if c := condition(h.cluster(t, "cc"), sunkv1.ConditionConfigApplied); c.Reason != sunkv1.ReasonCheckingConfig {
			return fmt.Errorf("ConfigApplied %+v", c)
		}
		return nil
	})
	if err := h.get(t, "cc-config", &corev1.ConfigMap{}); err == nil {
		t.Fatal("the configuration was applied before Slurm checked it")
	}
	var candidate corev1.ConfigMap
	if err := h.get(t, "cc-config-check", &candidate); err != nil || render.HashInSlurmConf(candidate.Data["slurm.conf"]) != p.Annotations[wellknown.AnnotationConfigHash] {
		t.Fatalf("candidate ConfigMap %v: hash %q, pod's %q", err, render.HashInSlurmConf(candidate.Data["slurm.conf"]), p.Annotations[wellknown.AnnotationConfigHash])
	}
	h.finish(t, p, 0, "")
	var conf corev1.ConfigMap
	eventually(t, "the checked configuration applied", func() error { return h.get(t, "cc-config", &conf) })
	good := render.HashInSlurmConf(conf.Data["slurm.conf"])

	// A change Slurm refuses: not applied, and the condition quotes Slurm.
	eventually(t, "spec update", func() error {
		sc := h.cluster(t, "cc")
		sc.Spec.Controller.ExtraConf = "MaxJobCount=abc"
		return h.c.Update(ctx, sc)
	})
	p = h.checkPod(t, "cc")
	const slurmSays = "scontrol: error: MaxJobCount value (abc) is not a valid number\nscontrol: fatal: Unable to process configuration file"
	h.finish(t, p, 1, slurmSays)
	eventually(t, "SlurmRejectedConfig", func() error {
		c := condition(h.cluster(t, "cc"), sunkv1.ConditionConfigApplied)
		if c.Reason != sunkv1.ReasonSlurmRejectedConfig || !strings.Contains(c.Message, "MaxJobCount value (abc) is not a valid number") {
			return fmt.Errorf("ConfigApplied %+v", c)
		}
		return h.event("cc", sunkv1.ReasonSlurmRejectedConfig)
	})
	if err := h.get(t, "cc-config", &conf); err != nil || render.HashInSlurmConf(conf.Data["slurm.conf"]) != good || strings.Contains(conf.Data["slurm.conf"], "MaxJobCount=abc") {
		t.Fatalf("the refused configuration reached the config ConfigMap (%v)", err)
	}

	// The fix is checked and applied; the refused check pod goes.
	eventually(t, "spec update", func() error {
		sc := h.cluster(t, "cc")
		sc.Spec.Controller.ExtraConf = "MaxJobCount=20000"
		return h.c.Update(ctx, sc)
	})
	refused := p.Name
	p = h.checkPod(t, "cc")
	h.finish(t, p, 0, "")
	eventually(t, "the fix applied", func() error {
		if err := h.get(t, "cc-config", &conf); err != nil {
			return err
		}
		if !strings.Contains(conf.Data["slurm.conf"], "MaxJobCount=20000") {
			return fmt.Errorf("not yet")
		}
		var old corev1.Pod
		if err := h.get(t, refused, &old); err == nil && old.DeletionTimestamp.IsZero() {
			return fmt.Errorf("refused check pod %s still there", refused)
		}
		return nil
	})
}
