package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/wait"
)

// testPolicy lets the test beds' namespace ask for anything.
var testPolicy = sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{{
	Name: "tests", Namespaces: []string{"ns"}, Partitions: []string{"*"}, Accounts: []string{"*"}, QOS: []string{"*"},
	Reservations: []string{"*"}, MaxPriority: ptr.To[int64](1 << 32), Preempt: true}}}}

func TestPolicyRefusal(t *testing.T) {
	tier := func(n int32) *int32 { return &n }
	spec := &sunkv1.SlurmClusterSpec{
		Partitions: []sunkv1.PartitionSpec{{Name: "batch", Default: true, PriorityTier: tier(1)}, {Name: "urgent", PriorityTier: tier(10)}, {Name: "gpu", PriorityTier: tier(1)}},
		Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio},
		SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
			{Name: "serving", Namespaces: []string{"web"}, Partitions: []string{"urgent"}, Preempt: true},
			{Name: "research", Namespaces: []string{"ml"}, Partitions: []string{"gpu", "urgent"}, Accounts: []string{"ml"}, QOS: []string{"*"},
				Reservations: []string{"maint"}, MaxPriority: ptr.To[int64](100), MaxGangSize: ptr.To[int32](64)},
		}},
	}
	qosSpec := &sunkv1.SlurmClusterSpec{Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionQOS},
		SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{{Name: "r", Namespaces: []string{"ml"}, QOS: []string{"*"}}}}}
	prio := func(n uint32) *uint32 { return &n }
	denySpec := &sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Unlisted: sunkv1.UnlistedDeny,
		Tenants: []sunkv1.SchedulerTenant{{Name: "r", Namespaces: []string{"ml"}}}}}
	for _, c := range []struct {
		name      string
		spec      *sunkv1.SlurmClusterSpec
		namespace string
		job       slurm.JobSubmit
		want      string // "" allowed, else a part of the refusal
	}{
		{"no tenant, nothing asked: the default partition", spec, "other", slurm.JobSubmit{}, ""},
		{"no tenant, the default partition by name", spec, "other", slurm.JobSubmit{Partition: "batch"}, ""},
		{"no tenant, another partition", spec, "other", slurm.JobSubmit{Partition: "gpu"}, `namespace other (in no tenant) may not use partition "gpu" (allowed: batch (default))`},
		{"no tenant, an account", spec, "other", slurm.JobSubmit{Account: "ml"}, `may not use account "ml" (allowed: none)`},
		{"no tenant, a QOS", spec, "other", slurm.JobSubmit{QOS: "high"}, `may not use QOS "high"`},
		{"no tenant, a reservation", spec, "other", slurm.JobSubmit{Reservation: "maint"}, `may not use reservation "maint"`},
		{"no tenant, a priority", spec, "other", slurm.JobSubmit{Priority: prio(1)}, "may not set priority 1 (allowed: none)"},
		{"its partition and preemption", spec, "web", slurm.JobSubmit{Partition: "urgent"}, ""},
		{"another tenant's partition", spec, "web", slurm.JobSubmit{Partition: "gpu"}, `namespace web (tenant serving) may not use partition "gpu"`},
		{"a list smuggling a partition in", spec, "web", slurm.JobSubmit{Partition: "urgent,gpu"}, `partition "gpu"`},
		{"allowed partition that preempts, without preempt", spec, "ml", slurm.JobSubmit{Partition: "urgent"}, `may not preempt Slurm jobs: partition "urgent" has priority tier 10, above the lowest (1)`},
		{"everything within bounds", spec, "ml", slurm.JobSubmit{Partition: "gpu", Account: "ml", QOS: "any", Reservation: "maint", Priority: prio(100)}, ""},
		{"priority over the maximum", spec, "ml", slurm.JobSubmit{Priority: prio(101)}, "may not set priority 101 (allowed: at most 100)"},
		{"another account", spec, "ml", slurm.JobSubmit{Account: "web"}, `may not use account "web" (allowed: ml)`},
		{"qos preemption: a QOS without preempt", qosSpec, "ml", slurm.JobSubmit{QOS: "high"}, `may not preempt Slurm jobs: QOS "high" may preempt`},
		{"qos preemption: no QOS", qosSpec, "ml", slurm.JobSubmit{}, ""},
		{"a default partition that preempts", &sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "hi", Default: true, ExtraConf: "PriorityTier=5"}, {Name: "lo"}},
			Preemption: sunkv1.PreemptionSpec{Type: sunkv1.PreemptionPartitionPrio}}, "other", slurm.JobSubmit{}, `partition "hi" has priority tier 5`},
		{"unlisted: Deny refuses a namespace in no tenant", denySpec, "other", slurm.JobSubmit{}, `namespace other (in no tenant) may not ask this cluster for machines (unlisted: Deny`},
		{"unlisted: Deny lets a tenant's namespace in", denySpec, "ml", slurm.JobSubmit{}, ""},
		{"tiers do not matter without preemption", &sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{{Name: "hi", Default: true, PriorityTier: tier(5)}, {Name: "lo"}}}, "other", slurm.JobSubmit{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := policyRefusal("slurm/c1", c.spec, c.namespace, &c.job, 1)
			switch {
			case c.want == "" && got != "":
				t.Fatalf("refused: %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Fatalf("refusal %q, want one containing %q", got, c.want)
			case c.want != "" && !strings.HasPrefix(got, "SlurmCluster slurm/c1 spec.schedulerPolicy: "):
				t.Fatalf("refusal %q does not name the policy", got)
			}
		})
	}
}

// A pod its policy refuses is kept out of the queue with a condition and an event that name the
// policy, and PreFilter (for a profile without PreEnqueue) finds it unresolvable: no job, no
// preemption.

// TestPolicyGangSize: a tenant's maxGangSize bounds its gangs (a gang of exclusive members
// holds that many whole nodes); without it any size the scheduler takes passes.
func TestPolicyGangSize(t *testing.T) {
	spec := &sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
		{Name: "research", Namespaces: []string{"ml"}, MaxGangSize: ptr.To[int32](64)},
		{Name: "serving", Namespaces: []string{"web"}},
	}}}
	for _, c := range []struct {
		namespace string
		members   int
		want      string
	}{
		{"ml", 1, ""},
		{"ml", 64, ""},
		{"ml", 65, "namespace ml (tenant research) may not run a gang of 65 members (allowed: at most 64)"},
		{"web", 10000, ""},
		{"other", 10000, ""},
	} {
		got := policyRefusal("slurm/c1", spec, c.namespace, &slurm.JobSubmit{}, c.members)
		if (c.want == "" && got != "") || (c.want != "" && !strings.Contains(got, c.want)) {
			t.Errorf("%s, gang of %d: refusal %q, want %q", c.namespace, c.members, got, c.want)
		}
	}
}

func TestPolicyRefusedPod(t *testing.T) {
	b := newTestBed(t, 1, nil, nil)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "elsewhere", UID: "u-refused",
		Annotations: map[string]string{wellknown.AnnotationPartition: "urgent"}},
		Spec: v1.PodSpec{SchedulerName: "sunk-scheduler", Containers: []v1.Container{{Name: "c"}}}}
	if _, err := b.h.cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := b.p.PreEnqueue(context.Background(), pod)
	if st.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "spec.schedulerPolicy: namespace elsewhere") {
		t.Fatalf("PreEnqueue: %v", st)
	}
	_, st = b.p.PreFilter(context.Background(), framework.NewCycleState(), pod)
	if st.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), `may not use partition "urgent"`) {
		t.Fatalf("PreFilter: %v", st)
	}
	b.p.showRefusal(context.Background(), pod, st.Message())
	b.p.showRefusal(context.Background(), pod, st.Message()) // once per message
	// PreEnqueue showed the same refusal from a goroutine: whichever of it and the calls above
	// came first writes the condition, and the write may still be under way.
	var conds []v1.PodCondition
	wait.For(t, "the refusal's condition", 30*time.Second, 10*time.Millisecond, func() error {
		got, err := b.h.cs.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if conds = got.Status.Conditions; len(conds) == 0 {
			return fmt.Errorf("no condition yet")
		}
		return nil
	})
	if c := conds; len(c) != 1 || c[0].Reason != sunkv1.ReasonPolicyDenied || c[0].Status != v1.ConditionFalse || c[0].Message != st.Message() {
		t.Fatalf("conditions %+v", c)
	}
	events := 0
	for len(b.h.rec.Events) > 0 {
		if e := <-b.h.rec.Events; strings.Contains(e, sunkv1.ReasonPolicyDenied) {
			events++
		}
	}
	if events != 1 {
		t.Fatalf("%d %s events, want 1", events, sunkv1.ReasonPolicyDenied)
	}
	if jobs, _ := b.slurm.ListJobs(context.Background(), time.Time{}); len(jobs.Jobs) != 0 {
		t.Fatalf("jobs submitted: %v", jobs.Jobs)
	}
	// A deleted pod's refusal is forgotten.
	b.p.denied.keepOnly(func(types.UID) bool { return false })
	if n := len(b.p.denied.last); n != 0 {
		t.Fatalf("%d refusals kept for pods that are gone", n)
	}
}

// The informer decodes the SlurmCluster once per version, and says when it is missing.
func TestClusterInformer(t *testing.T) {
	sc := &sunkv1.SlurmCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: sunkv1.GroupVersion.String(), Kind: "SlurmCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "slurm", ResourceVersion: "1"},
		Spec:       sunkv1.SlurmClusterSpec{Image: "slurm", Partitions: []sunkv1.PartitionSpec{{Name: "batch", Default: true}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sc)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{slurmClusters: "SlurmClusterList"}, &unstructured.Unstructured{Object: obj})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 10)
	c := newClusterInformer(dyn, "slurm", "c1")
	go c.run(ctx, func() { changed <- struct{}{} })
	if !cache.WaitForCacheSync(ctx.Done(), c.hasSynced) {
		t.Fatal("not synced")
	}
	<-changed // the add
	s1, err := c.spec()
	if err != nil || s1.DefaultPartition() != "batch" {
		t.Fatalf("spec %+v, %v", s1, err)
	}
	if s2, _ := c.spec(); s2 != s1 {
		t.Error("the same version was decoded again")
	}
	if err := dyn.Resource(slurmClusters).Namespace("slurm").Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	<-changed // the delete
	if _, err := c.spec(); err == nil || !strings.Contains(err.Error(), "SlurmCluster slurm/c1 not found") {
		t.Fatalf("a deleted SlurmCluster: %v", err)
	}
}

// TestChargeTo: a job that names no account is charged to its namespace's tenant's default
// account; one that names an account keeps it; a tenant without a default and an unlisted
// namespace leave it unset (Slurm's default account of the user).
func TestChargeTo(t *testing.T) {
	spec := &sunkv1.SlurmClusterSpec{SchedulerPolicy: sunkv1.SchedulerPolicy{Tenants: []sunkv1.SchedulerTenant{
		{Name: "a", Namespaces: []string{"team-a"}, Accounts: []string{"a", "shared"}, DefaultAccount: "a"},
		{Name: "b", Namespaces: []string{"team-b"}, Accounts: []string{"*"}},
	}}}
	for _, c := range []struct{ namespace, named, want string }{
		{"team-a", "", "a"},
		{"team-a", "shared", "shared"},
		{"team-b", "", ""},
		{"elsewhere", "", ""},
	} {
		job := slurm.JobSubmit{Account: c.named}
		if chargeTo(spec, c.namespace, &job); job.Account != c.want {
			t.Errorf("namespace %s, pod naming %q: account %q, want %q", c.namespace, c.named, job.Account, c.want)
		}
	}
}
