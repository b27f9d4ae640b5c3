//go:build integration

// Package operator tests the SlurmCluster and NodeSet controllers and admission on a real
// kube-apiserver (envtest). No kubelet runs here: pods and workload status are written by
// the test where a kubelet or controller-manager would, and Slurm is the in-memory fake.
// test/e2e covers the same controllers with real pods and real Slurm.
package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

func TestSlurmClusterObjectsKeysAndConditions(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	// An existing JWT key is the admin's: it must survive untouched.
	ownJWT := []byte(strings.Repeat("k", 48))
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c1-jwt-key"}, Data: map[string][]byte{"jwt.key": ownJWT}}); err != nil {
		t.Fatal(err)
	}
	sc := newCluster(h.ns, "c1")
	if err := h.c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}

	// The prolog's ConfigMap is missing: the cluster says so and renders nothing.
	eventually(t, "ScriptNotFound", func() error {
		c := condition(h.cluster(t, "c1"), sunkv1.ConditionConfigApplied)
		if c.Reason != sunkv1.ReasonScriptNotFound || !strings.Contains(c.Message, "spec.prolog[0].configMapKeyRef") {
			return fmt.Errorf("ConfigApplied = %+v", c)
		}
		return nil
	})
	if err := h.get(t, "c1-config", &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("config rendered without its prolog: %v", err)
	}
	if err := h.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "site-scripts"}, Data: map[string]string{"marker.sh": "#!/bin/sh\ntouch /tmp/marker\n"}}); err != nil {
		t.Fatal(err)
	}

	var conf corev1.ConfigMap
	eventually(t, "config ConfigMap", func() error { return h.get(t, "c1-config", &conf) })
	for _, want := range []string{"ClusterName=c1", "PartitionName=batch Nodes=ALL Default=YES", "Prolog=/etc/slurm-scripts/prolog",
		"AccountingStorageHost=c1-accounting.slurm.svc.cluster.local", "SlurmctldHost=c1-controller-0(c1-controller-0.c1-controller.slurm.svc.cluster.local)"} {
		if !strings.Contains(conf.Data["slurm.conf"], want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf.Data["slurm.conf"])
		}
	}
	var scripts corev1.ConfigMap
	eventually(t, "scripts ConfigMap", func() error { return h.get(t, "c1-scripts", &scripts) })
	if scripts.Data["prolog-00-marker"] != "#!/bin/sh\ntouch /tmp/marker\n" {
		t.Errorf("scripts = %v", scripts.Data)
	}

	var auth, jwt, dbd, hostKey corev1.Secret
	eventually(t, "keys", func() error {
		for name, s := range map[string]*corev1.Secret{"c1-auth-key": &auth, "c1-jwt-key": &jwt, "c1-slurmdbd": &dbd, "c1-ssh-host-key": &hostKey} {
			if err := h.get(t, name, s); err != nil {
				return err
			}
		}
		return nil
	})
	// Keys outlive the cluster: no owner reference, so deleting the SlurmCluster leaves them.
	if len(auth.Data["slurm.key"]) != 1024 || len(auth.OwnerReferences) != 0 || auth.Labels["sunk.dev/cluster"] != "c1" {
		t.Errorf("auth key: %d bytes, owners %v, labels %v", len(auth.Data["slurm.key"]), auth.OwnerReferences, auth.Labels)
	}
	// The login pods' SSH host key: one per cluster, in sshd's format, kept like the others.
	if k, err := ssh.ParsePrivateKey(hostKey.Data["ssh_host_ed25519_key"]); err != nil || k.PublicKey().Type() != ssh.KeyAlgoED25519 || len(hostKey.OwnerReferences) != 0 {
		t.Errorf("ssh host key: %v, owners %v", err, hostKey.OwnerReferences)
	}
	// A key Secret the cluster owns (made before keys were retained) is released.
	owned := auth.DeepCopy()
	if err := controllerutil.SetControllerReference(h.cluster(t, "c1"), owned, h.c.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Update(ctx, owned); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the owned auth key released", func() error {
		if err := h.get(t, "c1-auth-key", &auth); err != nil {
			return err
		}
		if len(auth.OwnerReferences) != 0 {
			return fmt.Errorf("owners %v", auth.OwnerReferences)
		}
		return nil
	})
	if string(jwt.Data["jwt.key"]) != string(ownJWT) {
		t.Error("the existing JWT key was replaced")
	}
	// ...and taken up aloud: labelled as the cluster's, with an event naming it.
	eventually(t, "the existing JWT key labelled", func() error {
		if err := h.get(t, "c1-jwt-key", &jwt); err != nil {
			return err
		}
		if jwt.Labels[wellknown.LabelCluster] != "c1" {
			return fmt.Errorf("labels %v", jwt.Labels)
		}
		return nil
	})
	eventually(t, "KeyAdopted event", func() error { return h.event("c1", sunkv1.ReasonKeyAdopted) })
	if !strings.Contains(string(dbd.Data["slurmdbd.conf"]), "DbdHost=c1-accounting-0") || !strings.Contains(string(dbd.Data["slurmdbd.conf"]), "StoragePass=") {
		t.Errorf("slurmdbd.conf = %s", dbd.Data["slurmdbd.conf"])
	}

	for _, o := range []struct {
		name string
		obj  client.Object
	}{{"c1-controller", &appsv1.StatefulSet{}}, {"c1-controller", &corev1.Service{}}, {"c1-restapi", &appsv1.Deployment{}},
		{"c1-restapi", &corev1.Service{}}, {"c1-login", &appsv1.StatefulSet{}}, {"c1-login", &corev1.Service{}}, {"c1-login-hosts", &corev1.Service{}},
		{"c1-accounting", &appsv1.StatefulSet{}}, {"c1-database", &appsv1.StatefulSet{}}, {"c1-database", &corev1.Service{}},
		{"c1-controller", &policyv1.PodDisruptionBudget{}}, {"c1-restapi", &policyv1.PodDisruptionBudget{}}, {"c1-login", &policyv1.PodDisruptionBudget{}}} {
		eventually(t, fmt.Sprintf("%T %s", o.obj, o.name), func() error { return h.get(t, o.name, o.obj) })
	}
	// A drain takes one slurmctld (or slurmrestd, or login pod) at a time.
	var ctldBudget policyv1.PodDisruptionBudget
	if err := h.get(t, "c1-controller", &ctldBudget); err != nil || ctldBudget.Spec.MaxUnavailable.IntValue() != 1 ||
		ctldBudget.Spec.Selector.MatchLabels[wellknown.LabelComponent] != wellknown.ComponentController || !metav1.IsControlledBy(&ctldBudget, h.cluster(t, "c1")) {
		t.Errorf("slurmctld's disruption budget: %v %+v", err, ctldBudget)
	}
	var ctld appsv1.StatefulSet
	_ = h.get(t, "c1-controller", &ctld)
	if len(ctld.Spec.VolumeClaimTemplates) != 1 || ctld.Spec.Template.Spec.SecurityContext.FSGroup == nil {
		t.Errorf("controller StatefulSet: claims %v, security %v", ctld.Spec.VolumeClaimTemplates, ctld.Spec.Template.Spec.SecurityContext)
	}

	// Nothing runs here, so the components are not ready and Ready says which.
	eventually(t, "conditions", func() error {
		sc := h.cluster(t, "c1")
		ready, ctldc := condition(sc, sunkv1.ConditionReady), condition(sc, sunkv1.ConditionControllerReady)
		if ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "ControllerReady") || ctldc.Reason != sunkv1.ReasonNotReady || sc.Status.ObservedGeneration != sc.Generation {
			return fmt.Errorf("Ready %+v, ControllerReady %+v", ready, ctldc)
		}
		if sc.Status.Endpoints.Controller != "c1-controller-0.c1-controller.slurm.svc.cluster.local:6817" {
			return fmt.Errorf("endpoints %+v", sc.Status.Endpoints)
		}
		return nil
	})

	// Switching accounting off removes slurmdbd and the database.
	sc = h.cluster(t, "c1")
	sc.Spec.Accounting.Mode = sunkv1.AccountingNone
	if err := h.c.Update(ctx, sc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "accounting removed", func() error {
		for _, name := range []string{"c1-accounting", "c1-database"} {
			var s appsv1.StatefulSet
			if err := h.get(t, name, &s); err == nil && s.DeletionTimestamp.IsZero() {
				return fmt.Errorf("%s still exists", name)
			}
		}
		return nil
	})
}

func TestSlurmClusterKeyMissingIsNotReplaced(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c2-auth-key"}, Data: map[string][]byte{"other": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	sc := newCluster(h.ns, "c2")
	sc.Spec.Prolog = nil
	if err := h.c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "KeyMissing", func() error {
		if c := condition(h.cluster(t, "c2"), sunkv1.ConditionConfigApplied); c.Reason != sunkv1.ReasonKeyMissing {
			return fmt.Errorf("ConfigApplied = %+v", c)
		}
		return nil
	})
	var s corev1.Secret
	if err := h.get(t, "c2-auth-key", &s); err != nil || len(s.Data) != 1 || s.Data["slurm.key"] != nil {
		t.Fatalf("the Secret was touched: %v %v", err, s.Data)
	}
}

// TestConfigChangeReconfiguresWithoutRestart drives the path from a spec change to
// slurmctld: kubelet delivers the file late, the controller waits, then reconfigures over
// REST; a port change instead rolls the StatefulSet.
func TestConfigChangeReconfiguresWithoutRestart(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	sc := newCluster(h.ns, "c3")
	sc.Spec.Prolog, sc.Spec.Accounting.Mode = nil, sunkv1.AccountingNone
	if err := h.c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	// Play the StatefulSet controller and kubelet: a Ready slurmctld pod that sees the
	// current file, and an available slurmrestd.
	ctld, pod := h.runControlPlane(t, "c3")
	restartHash := ctld.Spec.Template.Annotations[wellknown.AnnotationRestartHash]
	var conf corev1.ConfigMap
	_ = h.get(t, "c3-config", &conf)
	h.exec.deliver("c3-controller-0", conf.Data["slurm.conf"])

	applied := func(hash string) func() error {
		return func() error {
			sc := h.cluster(t, "c3")
			if c := condition(sc, sunkv1.ConditionConfigApplied); sc.Status.ConfigHash != hash || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("configHash %q (want %q), ConfigApplied %+v", sc.Status.ConfigHash, hash, c)
			}
			return nil
		}
	}
	first := render.HashInSlurmConf(conf.Data["slurm.conf"])
	eventually(t, "first configuration applied", applied(first))
	reconfigures := h.slurm.Calls("Reconfigure")

	// A new partition: a reconfigure, once kubelet delivers the file, and no restart.
	sc = h.cluster(t, "c3")
	sc.Spec.Partitions = append(sc.Spec.Partitions, sunkv1.PartitionSpec{Name: "gpu", NodeSets: []string{"gpu"}})
	if err := h.c.Update(ctx, sc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new config rendered", func() error {
		if err := h.get(t, "c3-config", &conf); err != nil {
			return err
		}
		if !strings.Contains(conf.Data["slurm.conf"], "PartitionName=gpu") {
			return fmt.Errorf("no gpu partition yet")
		}
		return nil
	})
	second := render.HashInSlurmConf(conf.Data["slurm.conf"])
	eventually(t, "waiting for kubelet", func() error {
		sc := h.cluster(t, "c3")
		if c := condition(sc, sunkv1.ConditionConfigApplied); c.Reason != sunkv1.ReasonWaitingForKubelet {
			return fmt.Errorf("ConfigApplied %+v", c)
		}
		if err := h.get(t, "c3-controller-0", pod); err != nil {
			return err
		}
		if pod.Annotations[wellknown.AnnotationConfigHash] != second {
			return fmt.Errorf("pod annotation %q, want %q", pod.Annotations[wellknown.AnnotationConfigHash], second)
		}
		return nil
	})
	if got := h.slurm.Calls("Reconfigure"); got != reconfigures {
		t.Fatalf("reconfigured before the pod saw the new file (%d calls, had %d)", got, reconfigures)
	}
	h.exec.deliver("c3-controller-0", conf.Data["slurm.conf"])
	eventually(t, "second configuration applied", applied(second))
	if got := h.slurm.Calls("Reconfigure"); got != reconfigures+1 {
		t.Errorf("Reconfigure calls = %d, want %d", got, reconfigures+1)
	}
	_ = h.get(t, "c3-controller", ctld)
	if ctld.Spec.Template.Annotations[wellknown.AnnotationRestartHash] != restartHash {
		t.Error("a partition change restarted slurmctld")
	}

	// A port change (a key sunk keeps, so only through unsafeConfKeys) cannot be
	// reconfigured: the template's restart hash rolls the pod.
	sc = h.cluster(t, "c3")
	sc.Spec.Controller.ExtraConf = "SlurmctldPort=6900"
	sc.Spec.Controller.UnsafeConfKeys = []string{"SlurmctldPort"}
	if err := h.c.Update(ctx, sc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rolling restart", func() error {
		if err := h.get(t, "c3-controller", ctld); err != nil {
			return err
		}
		if ctld.Spec.Template.Annotations[wellknown.AnnotationRestartHash] == restartHash {
			return fmt.Errorf("restart hash unchanged")
		}
		if c := condition(h.cluster(t, "c3"), sunkv1.ConditionConfigApplied); c.Reason != sunkv1.ReasonRollingRestart {
			return fmt.Errorf("ConfigApplied %+v", c)
		}
		return nil
	})
	// The escape is on record: a Warning event names the keys taken over.
	eventually(t, "UnsafeConfKeys event", func() error { return h.event("c3", sunkv1.ReasonUnsafeConfKeys) })
}

func TestAdmissionRejectsBadSpecsNamingTheField(t *testing.T) {
	h := start(t)
	cases := map[string]struct {
		mutate func(*sunkv1.SlurmCluster)
		want   string
	}{
		"two default partitions": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.Partitions = []sunkv1.PartitionSpec{{Name: "a", Default: true}, {Name: "b", Default: true}}
		}, "spec.partitions: at most one partition may be the default"},
		"external accounting without a database": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.Accounting = sunkv1.AccountingSpec{Mode: sunkv1.AccountingExternal}
		}, "spec.accounting.external is required"},
		"script both inline and from a ConfigMap": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.Prolog[0].Inline = ptr.To("#!/bin/sh\n")
		}, "exactly one of inline and configMapKeyRef"},
		"bad accounting mode": {func(sc *sunkv1.SlurmCluster) { sc.Spec.Accounting.Mode = "Maybe" }, "spec.accounting.mode"},
		"bad partition time":  {func(sc *sunkv1.SlurmCluster) { sc.Spec.Partitions[0].MaxTime = "soon" }, "spec.partitions[0].maxTime"},
		"job_submit.lua that does not parse": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.JobSubmitLua = "function slurm_job_submit(job_desc, part_list, submit_uid)\n  if job_desc.comment == nil then\n  return slurm.SUCCESS\nend\n"
		}, "spec.jobSubmitLua"},
		"extra conf that is not Key=Value": {func(sc *sunkv1.SlurmCluster) { sc.Spec.Controller.ExtraConf = "SlurmdTimeout 30" }, "spec.controller.extraConf"},
		"extra conf with a key sunk keeps": {func(sc *sunkv1.SlurmCluster) { sc.Spec.Controller.ExtraConf = "AuthType = auth/none" }, "spec.controller.extraConf: Forbidden"},
		"extra conf with an unknown key":   {func(sc *sunkv1.SlurmCluster) { sc.Spec.Controller.ExtraConf = "BogusKey=1" }, "BogusKey is not a slurm.conf key"},
		"the escape for a key the operator does not allow": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.Controller.ExtraConf, sc.Spec.Controller.UnsafeConfKeys = "AuthType=auth/none", []string{"AuthType"}
		}, "spec.controller.unsafeConfKeys[0]: Forbidden: this operator does not let SlurmClusters take over AuthType"},
		"partition node set injecting a line": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.Partitions[0].NodeSets = []string{"gpu\nAuthType=auth/none"}
		}, "spec.partitions[0].nodeSets[0]"},
		"job_submit.lua whose top level fails": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.JobSubmitLua = "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\nfunction slurm_job_modify(j, jr, p, u) return slurm.SUCCESS end\nundefined_function()\n"
		}, "top-level code fails"},
		"external database host injecting a line": {func(sc *sunkv1.SlurmCluster) {
			sc.Spec.Accounting = sunkv1.AccountingSpec{Mode: sunkv1.AccountingExternal, External: &sunkv1.ExternalDatabase{Host: "db\nStorageType=x", User: "slurm",
				PasswordSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "pw"}, Key: "password"}}}
		}, "spec.accounting.external.host"},
	}
	// A prolog ConfigMap that exists at admission is checked there like an inline script.
	if err := h.c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "bad-scripts"}, Data: map[string]string{"x.sh": "echo no shebang\n"}}); err != nil {
		t.Fatal(err)
	}
	cases["prolog from a ConfigMap without #!"] = struct {
		mutate func(*sunkv1.SlurmCluster)
		want   string
	}{func(sc *sunkv1.SlurmCluster) {
		sc.Spec.Prolog[0].ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "bad-scripts"}, Key: "x.sh"}
	}, "spec.prolog[0].configMapKeyRef: Invalid value: \"bad-scripts/x.sh\": must start with a #! line"}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			sc := newCluster(h.ns, "bad")
			c.mutate(sc)
			err := h.c.Create(context.Background(), sc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("create: %v, want an error containing %q", err, c.want)
			}
		})
	}
	// A valid script passes, and an update breaking it is refused just the same.
	sc := newCluster(h.ns, "good")
	sc.Spec.JobSubmitLua = "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\nfunction slurm_job_modify(j, jr, p, u) return slurm.SUCCESS end\n"
	if err := h.c.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	// (Read afresh and retried on a conflict: the operator writes its finalizer and status.)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc := h.cluster(t, "good")
		sc.Spec.JobSubmitLua = "function ("
		return h.c.Update(context.Background(), sc)
	})
	if err == nil || !strings.Contains(err.Error(), "spec.jobSubmitLua") {
		t.Fatalf("update with a broken script: %v", err)
	}
}
