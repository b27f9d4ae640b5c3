// Tenancy: what the pods of each namespace may ask of Slurm, from the SlurmCluster's
// spec.schedulerPolicy (api/v1alpha1, docs/scheduler.md).

package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

// policyRefusal says why the job of a pod in namespace, of a gang of members (1 for a pod
// alone), is outside the SlurmCluster's scheduler policy ("" when it is inside). cluster names
// the SlurmCluster (namespace/name) in the message.
//
// A namespace no tenant lists is refused with spec.schedulerPolicy.unlisted Deny; otherwise it
// gets the zero tenant: the default partition only, no account, QOS, reservation or priority
// of its own, and no preemption. Preempting is judged from the
// spec: with partition_prio a partition above the cluster's lowest tier preempts (whether the
// partitions share nodes is not considered: the policy errs on the side of refusing); with qos
// any QOS may (its Preempt list lives in accounting, out of sight).
func policyRefusal(cluster string, spec *sunkv1.SlurmClusterSpec, namespace string, job *slurm.JobSubmit, members int) string {
	tenant := spec.SchedulerPolicy.TenantOf(namespace)
	listed := tenant != nil
	who := fmt.Sprintf("namespace %s (in no tenant)", namespace)
	if listed {
		who = fmt.Sprintf("namespace %s (tenant %s)", namespace, tenant.Name)
	} else {
		tenant = &sunkv1.SchedulerTenant{}
	}
	refuse := func(format string, a ...any) string {
		return fmt.Sprintf("SlurmCluster %s spec.schedulerPolicy: %s %s", cluster, who, fmt.Sprintf(format, a...))
	}
	if !listed && spec.SchedulerPolicy.Unlisted == sunkv1.UnlistedDeny {
		return refuse("may not ask this cluster for machines (unlisted: Deny; a tenant must list the namespace)")
	}
	def := spec.DefaultPartition()
	partitions := jobPartitions(spec, job)
	for _, p := range partitions {
		if p != def && !allows(tenant.Partitions, p) {
			return refuse("may not use partition %q (allowed: %s)", p, allowedList(def, tenant.Partitions))
		}
	}
	for _, l := range []struct {
		what, value string
		allowed     []string
	}{{"account", job.Account, tenant.Accounts}, {"QOS", job.QOS, tenant.QOS}, {"reservation", job.Reservation, tenant.Reservations}} {
		for _, v := range splitList(l.value) {
			if !allows(l.allowed, v) {
				return refuse("may not use %s %q (allowed: %s)", l.what, v, allowedList("", l.allowed))
			}
		}
	}
	if job.Priority != nil && (tenant.MaxPriority == nil || int64(*job.Priority) > *tenant.MaxPriority) {
		limit := "none"
		if tenant.MaxPriority != nil {
			limit = fmt.Sprintf("at most %d", *tenant.MaxPriority)
		}
		return refuse("may not set priority %d (allowed: %s)", *job.Priority, limit)
	}
	if tenant.MaxGangSize != nil && members > int(*tenant.MaxGangSize) {
		return refuse("may not run a gang of %d members (allowed: at most %d)", members, *tenant.MaxGangSize)
	}
	if !tenant.Preempt {
		if why := preempts(spec, partitions, job.QOS); why != "" {
			return refuse("may not preempt Slurm jobs: %s", why)
		}
	}
	return ""
}

// chargeTo gives a job that names no account (sunk.dev/account) its namespace's tenant's
// defaultAccount: every placeholder job runs as one Slurm user, and an account per tenant is
// what lets Slurm's accounting, fair share and limits tell tenants apart. It is called where a
// job is about to be submitted, after policyRefusal passed it: the default account is one the
// tenant may charge (the webhook holds it to the tenant's accounts).
func chargeTo(spec *sunkv1.SlurmClusterSpec, namespace string, job *slurm.JobSubmit) {
	if job.Account != "" {
		return
	}
	if t := spec.SchedulerPolicy.TenantOf(namespace); t != nil {
		job.Account = t.DefaultAccount
	}
}

// chargeTo applies chargeTo with the policy the plugin reads; unreadable, the job is left
// as it is (nothing is submitted while the policy cannot be read).
func (p *Plugin) chargeTo(namespace string, job *slurm.JobSubmit) {
	if spec, err := p.policy.spec(); err == nil {
		chargeTo(spec, namespace, job)
	}
}

// jobPartitions are the partitions a job asks for: its list, else the cluster's default.
func jobPartitions(spec *sunkv1.SlurmClusterSpec, job *slurm.JobSubmit) []string {
	if partitions := splitList(job.Partition); len(partitions) > 0 {
		return partitions
	}
	return []string{spec.DefaultPartition()}
}

// mayPreempt: the job could preempt other Slurm jobs (preempts), or the SlurmCluster cannot be
// read to tell.
func (p *Plugin) mayPreempt(job *slurm.JobSubmit) bool {
	spec, err := p.policy.spec()
	return err != nil || preempts(spec, jobPartitions(spec, job), job.QOS) != ""
}

// preempts says why a job in these partitions with this QOS could preempt others ("" if not).
func preempts(spec *sunkv1.SlurmClusterSpec, partitions []string, qos string) string {
	switch spec.Preemption.Type {
	case sunkv1.PreemptionPartitionPrio:
		all := spec.EffectivePartitions()
		lowest := all[0].Tier()
		for i := range all {
			lowest = min(lowest, all[i].Tier())
		}
		for i := range all {
			if slices.Contains(partitions, all[i].Name) && all[i].Tier() > lowest {
				return fmt.Sprintf("partition %q has priority tier %d, above the lowest (%d)", all[i].Name, all[i].Tier(), lowest)
			}
		}
	case sunkv1.PreemptionQOS:
		if qos != "" {
			return fmt.Sprintf("QOS %q may preempt (spec.preemption.type qos)", qos)
		}
	}
	return ""
}

// splitList splits a Slurm list option ("a,b"): sbatch takes several partitions (and
// reservations) at once, and each must be allowed.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func allows(allowed []string, v string) bool {
	return slices.Contains(allowed, sunkv1.AllowsAny) || slices.Contains(allowed, v)
}

func allowedList(always string, allowed []string) string {
	var names []string
	if always != "" {
		names = append(names, always+" (default)")
	}
	names = append(names, allowed...)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// policySource is the SlurmCluster whose policy applies: its spec (shared: read only), or why
// there is none.
type policySource interface {
	// run watches until ctx ends and calls changed on each change of the policy.
	run(ctx context.Context, changed func())
	spec() (*sunkv1.SlurmClusterSpec, error)
	hasSynced() bool
}

// clusterInformer watches the one SlurmCluster of the scheduler (by name in its namespace).
type clusterInformer struct {
	namespace, name string
	informer        cache.SharedIndexInformer
	// The spec last decoded and its resourceVersion: PreEnqueue asks for it once per pod, and
	// decoding a SlurmCluster costs far more than the rest of PreEnqueue.
	mu      sync.Mutex
	decoded *sunkv1.SlurmClusterSpec
	version string
}

var slurmClusters = sunkv1.GroupVersion.WithResource("slurmclusters")

// newClusterInformer watches the SlurmCluster once run.
func newClusterInformer(dyn dynamic.Interface, namespace, name string) *clusterInformer {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + name
	})
	return &clusterInformer{namespace: namespace, name: name, informer: f.ForResource(slurmClusters).Informer()}
}

// run takes changed here, not at construction: the handler fires from the informer's first
// list, and the plugin it calls must exist by then (a callback into a plugin still being
// built crashed sunk-scheduler at start-up).
func (c *clusterInformer) run(ctx context.Context, changed func()) {
	_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		// Only a spec change (a new generation) can change the policy; the operator writes the
		// status often.
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := cur.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetGeneration() != n.GetGeneration() {
				changed()
			}
		},
		DeleteFunc: func(any) { changed() },
	})
	c.informer.Run(ctx.Done())
}

func (c *clusterInformer) hasSynced() bool { return c.informer.HasSynced() }

func (c *clusterInformer) spec() (*sunkv1.SlurmClusterSpec, error) {
	obj, ok, err := c.informer.GetStore().GetByKey(c.namespace + "/" + c.name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("SlurmCluster %s/%s not found: its spec.schedulerPolicy says what pods may ask of Slurm", c.namespace, c.name)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("SlurmCluster %s/%s: unexpected %T", c.namespace, c.name, obj)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.decoded != nil && c.version == u.GetResourceVersion() {
		return c.decoded, nil
	}
	sc := &sunkv1.SlurmCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sc); err != nil {
		return nil, fmt.Errorf("SlurmCluster %s/%s: %w", c.namespace, c.name, err)
	}
	c.decoded, c.version = &sc.Spec, u.GetResourceVersion()
	return c.decoded, nil
}

// staticPolicy is a fixed spec (tests).
type staticPolicy struct{ s *sunkv1.SlurmClusterSpec }

func (s staticPolicy) run(context.Context, func())             {}
func (s staticPolicy) spec() (*sunkv1.SlurmClusterSpec, error) { return s.s, nil }
func (s staticPolicy) hasSynced() bool                         { return true }

// denials remembers the last policy refusal shown per pod, so that its condition and event
// are written once per message.
type denials struct {
	mu   sync.Mutex
	last map[types.UID]string
}

// keepOnly forgets the refusals of pods that are gone.
func (d *denials) keepOnly(exists func(types.UID) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	maps.DeleteFunc(d.last, func(uid types.UID, _ string) bool { return !exists(uid) })
}

// refusal is why the pod may not have the Slurm job it asks for, "" when it may (or when its
// annotations do not parse: PreFilter reports those).
func (p *Plugin) refusal(pod *v1.Pod) string {
	s, err := p.specOf(pod)
	if err != nil {
		return ""
	}
	spec, err := p.policy.spec()
	if err != nil {
		return err.Error()
	}
	return policyRefusal(p.args.Namespace+"/"+p.args.Cluster, spec, pod.Namespace, &s.Job, max(s.Gang.Size, 1))
}

// showRefusal writes the refusal into the pod's PodScheduled condition (reason
// SlurmPolicyDenied) and an event, once per message. A refused pod is kept out of the queue by
// PreEnqueue, so no scheduling cycle writes its condition.
func (p *Plugin) showRefusal(ctx context.Context, pod *v1.Pod, msg string) {
	p.denied.mu.Lock()
	repeat := p.denied.last[pod.UID] == msg
	p.denied.last[pod.UID] = msg
	p.denied.mu.Unlock()
	if repeat {
		return
	}
	p.lc.event(p, pod, v1.EventTypeWarning, sunkv1.ReasonPolicyDenied, "%s", msg)
	if err := p.writeCondition(ctx, pod, sunkv1.ReasonPolicyDenied, msg); err != nil {
		klog.FromContext(ctx).WithName(Name).Error(err, "showing a policy refusal", "pod", klog.KObj(pod))
		p.denied.mu.Lock()
		delete(p.denied.last, pod.UID) // shown again on the next attempt
		p.denied.mu.Unlock()
	}
}

// policyChanged sends every waiting pod through PreEnqueue again: the new policy may let some
// in, or refuse them for another reason.
func (p *Plugin) policyChanged() {
	p.activate(klog.Background().WithName(Name), p.ourPods(func(pod *v1.Pod) bool { return pod.Spec.NodeName == "" && alive(pod) }))
}

// forgetRefusal lets a pod's refusal be shown again (it was allowed in between).
func (p *Plugin) forgetRefusal(uid types.UID) {
	p.denied.mu.Lock()
	delete(p.denied.last, uid)
	p.denied.mu.Unlock()
}
