package slurmcluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

const conditionMetric = "sunk_slurmcluster_condition"

func newTestMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// expectSeries compares the registry's condition series with want, in the text format.
func expectSeries(t *testing.T, reg *prometheus.Registry, want ...string) {
	t.Helper()
	text := ""
	if len(want) > 0 {
		text = "# HELP sunk_slurmcluster_condition 1 for each status condition of each SlurmCluster, with its type, status and reason, as the operator last wrote them.\n" +
			"# TYPE sunk_slurmcluster_condition gauge\n" + strings.Join(want, "\n") + "\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(text), conditionMetric); err != nil {
		t.Error(err)
	}
}

func cond(typ string, ok bool, reason string) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: "m"}
	if ok {
		c.Status = metav1.ConditionTrue
	}
	return c
}

// TestConditionMetric: one series per condition; a condition whose reason or status changes
// keeps one series, with the new labels; a forgotten cluster has none and another keeps its own.
func TestConditionMetric(t *testing.T) {
	m, reg := newTestMetrics(t)
	a := types.NamespacedName{Namespace: "slurm", Name: "a"}
	b := types.NamespacedName{Namespace: "lab", Name: "b"}
	m.observe(a, []metav1.Condition{
		cond(sunkv1.ConditionControllerReady, true, sunkv1.ReasonReady),
		cond(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonCheckingConfig),
	})
	m.observe(b, []metav1.Condition{cond(sunkv1.ConditionReady, true, sunkv1.ReasonReady)})
	expectSeries(t, reg,
		`sunk_slurmcluster_condition{cluster="lab/b",reason="Ready",status="True",type="Ready"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="CheckingConfig",status="False",type="ConfigApplied"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="ControllerReady"} 1`,
	)

	m.observe(a, []metav1.Condition{
		cond(sunkv1.ConditionControllerReady, true, sunkv1.ReasonBackupInCharge),
		cond(sunkv1.ConditionConfigApplied, false, sunkv1.ReasonSlurmRejectedConfig),
		// Written by hand twice: the first counts, and the scrape does not fail.
		cond(sunkv1.ConditionConfigApplied, true, sunkv1.ReasonApplied),
	})
	expectSeries(t, reg,
		`sunk_slurmcluster_condition{cluster="lab/b",reason="Ready",status="True",type="Ready"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="BackupInCharge",status="True",type="ControllerReady"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="SlurmRejectedConfig",status="False",type="ConfigApplied"} 1`,
	)

	m.forget(a)
	expectSeries(t, reg, `sunk_slurmcluster_condition{cluster="lab/b",reason="Ready",status="True",type="Ready"} 1`)
	m.forget(b)
	expectSeries(t, reg)

	var none *Metrics
	none.observe(a, []metav1.Condition{cond(sunkv1.ConditionReady, true, sunkv1.ReasonReady)})
	none.forget(a)
}

// TestUpdateStatusExportsConditions: the series follow the status the reconciler wrote, Ready
// included, and stay as they were when the write fails.
func TestUpdateStatusExportsConditions(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := sunkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "slurm", Name: "a", Generation: 1}}
	failWrites := false
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sc).WithStatusSubresource(sc).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if failWrites {
					return errors.New("conflict")
				}
				return c.SubResource(sub).Patch(ctx, o, p, opts...)
			},
		}).Build()
	m, reg := newTestMetrics(t)
	r := &Reconciler{Client: c, Metrics: m}
	write := func(set func(*status)) error {
		t.Helper()
		got := &sunkv1.SlurmCluster{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(sc), got); err != nil {
			t.Fatal(err)
		}
		st := newStatus(got)
		set(st)
		return r.updateStatus(context.Background(), got, st)
	}
	allReady := func(st *status) {
		for _, typ := range []string{sunkv1.ConditionRestAPIReady, sunkv1.ConditionAccountingReady, sunkv1.ConditionLoginReady} {
			st.set(typ, true, sunkv1.ReasonReady, "")
		}
		st.set(sunkv1.ConditionConfigApplied, true, sunkv1.ReasonApplied, "")
	}

	if err := write(func(st *status) {
		allReady(st)
		st.set(sunkv1.ConditionControllerReady, true, sunkv1.ReasonBackupInCharge, "the backup serves")
	}); err != nil {
		t.Fatal(err)
	}
	backupInCharge := []string{
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Applied",status="True",type="ConfigApplied"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="BackupInCharge",status="True",type="ControllerReady"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="BackupInCharge",status="True",type="Ready"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="AccountingReady"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="LoginReady"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="RestApiReady"} 1`,
	}
	expectSeries(t, reg, backupInCharge...)

	failWrites = true
	if err := write(func(st *status) {
		st.set(sunkv1.ConditionControllerReady, true, sunkv1.ReasonReady, "the primary serves")
	}); err == nil {
		t.Fatal("the failed status write was not returned")
	}
	expectSeries(t, reg, backupInCharge...) // a failed write changes no series

	failWrites = false
	if err := write(func(st *status) {
		st.set(sunkv1.ConditionControllerReady, true, sunkv1.ReasonReady, "the primary serves")
	}); err != nil {
		t.Fatal(err)
	}
	expectSeries(t, reg,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Applied",status="True",type="ConfigApplied"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="AccountingReady"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="ControllerReady"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="LoginReady"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="Ready"} 1`,
		`sunk_slurmcluster_condition{cluster="slurm/a",reason="Ready",status="True",type="RestApiReady"} 1`,
	)
	// An operator restarted finds the status unchanged, writes nothing, and exports it.
	m2, _ := newTestMetrics(t)
	r.Metrics = m2
	if err := write(func(*status) {}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m2, conditionMetric); n != 6 {
		t.Errorf("%d series after a reconcile that wrote nothing, want the 6 conditions", n)
	}
}
