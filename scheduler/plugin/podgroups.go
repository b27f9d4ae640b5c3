// Gangs from scheduler-plugins PodGroups: the pods labelled scheduling.x-k8s.io/pod-group=<name>
// are one gang of the PodGroup's spec.minMember. The size is on the PodGroup, which the pods do
// not carry, so PodGroups are read from the API through a dynamic informer (the
// scheduler-plugins module is not one this module can require), started only once the API
// serves them.

package plugin

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/wellknown"
)

var podGroupGVR = schema.GroupVersionResource{Group: wellknown.PodGroupGroup, Version: wellknown.PodGroupVersion, Resource: wellknown.PodGroupResource}

// podGroupRecheck is how often the scheduler asks again whether the API serves PodGroups, until
// it does: a CRD installed after the scheduler started is read without a restart. A failed
// question is asked again after podGroupRetry.
const (
	podGroupRecheck = time.Minute
	podGroupRetry   = 5 * time.Second
)

type podGroupState int32

const (
	// podGroupsUnknown: the API has not answered yet whether it serves PodGroups (or the
	// question failed). Labelled pods wait, and the lifecycle loop does not start: it would
	// not find the gangs of running PodGroup jobs, and would cancel them.
	podGroupsUnknown podGroupState = iota
	// podGroupsAbsent: no PodGroup can exist, so the label names nothing and its pods are
	// scheduled as though it were not there, as before PodGroups were read.
	podGroupsAbsent
	// podGroupsServed: PodGroups are read from the informer's cache.
	podGroupsServed
)

// podGroupCache is the scheduler's view of PodGroups. The zero value knows nothing yet; a nil
// one serves none.
type podGroupCache struct {
	state atomic.Int32
	// lister and synced are set before state becomes podGroupsServed, and never change after.
	lister cache.GenericLister
	synced cache.InformerSynced
}

func (c *podGroupCache) current() podGroupState {
	if c == nil {
		return podGroupsAbsent
	}
	return podGroupState(c.state.Load())
}

// ready: PodGroups are not served, or their first list is in the cache.
func (c *podGroupCache) ready() bool {
	switch c.current() {
	case podGroupsAbsent:
		return true
	case podGroupsServed:
		return c.synced()
	}
	return false
}

// serve has the cache read PodGroups from lister from now on.
func (c *podGroupCache) serve(lister cache.GenericLister, synced cache.InformerSynced) {
	c.lister, c.synced = lister, synced
	c.state.Store(int32(podGroupsServed))
}

// podGroupGang: the pods labelled with a PodGroup's name (in its namespace) are one gang,
// named podgroup/<name>, of the PodGroup's spec.minMember, read from the cache. A PodGroup of
// minMember 1 makes plain pods. Where the API serves no PodGroups the label means nothing.
func podGroupGang(pod *v1.Pod, name string, groups *podGroupCache) (gang, gangSource, error) {
	g := gang{Name: "podgroup/" + name}
	waiting := func(why string) (gang, gangSource, error) {
		return g, gangFromPodGroup, &workloadError{From: gangFromPodGroup, Why: why, Waiting: true}
	}
	switch groups.current() {
	case podGroupsAbsent:
		return gang{}, "", nil
	case podGroupsUnknown:
		return waiting(fmt.Sprintf("waiting to learn whether the API serves %s", podGroupGVR.GroupResource()))
	}
	// Looked up before the first list is complete too: a PodGroup is in the cache before its
	// add event activates the pods that wait for it.
	obj, err := groups.lister.ByNamespace(pod.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return waiting(fmt.Sprintf("waiting for PodGroup %s/%s", pod.Namespace, name))
	case err != nil:
		return waiting(err.Error())
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return waiting(fmt.Sprintf("PodGroup %s/%s cached as a %T", pod.Namespace, name, obj))
	}
	n, shown := minMember(u)
	if n < 1 || n > maxGangSize {
		return g, gangFromPodGroup, &workloadError{From: gangFromPodGroup,
			Why: fmt.Sprintf("PodGroup %s/%s spec.minMember=%s: want an integer from 1 to %d", pod.Namespace, name, shown, maxGangSize)}
	}
	if n == 1 {
		return gang{}, "", nil
	}
	g.Size = n
	return g, gangFromPodGroup, nil
}

// minMember is a PodGroup's spec.minMember, and how to show it; 0 when it is missing or not an
// integer (JSON numbers decode to int64, or float64 when they have a fraction).
func minMember(u *unstructured.Unstructured) (int, string) {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "minMember")
	if err != nil || !found {
		return 0, "(missing)"
	}
	switch n := v.(type) {
	case int64:
		if n >= 0 && n <= maxGangSize {
			return int(n), fmt.Sprint(n)
		}
	case float64:
		if n == float64(int64(n)) && n >= 0 && n <= maxGangSize {
			return int(n), fmt.Sprint(n)
		}
	}
	return 0, fmt.Sprintf("%v", v)
}

// chooseMembers picks the size pods a PodGroup's job is for, from all its pods (alive, by name):
// those held first, then the others, each in name order; returned in name order. Held are the
// pods already given to a job (bound, being submitted for, in a live job of this process):
// choosing by name alone would let a pod created later with a smaller name take the place of
// one whose job is submitted, and ask a second job for the others.
func chooseMembers(all []*v1.Pod, size int, held func(*v1.Pod) bool) []*v1.Pod {
	if size <= 0 || len(all) <= size {
		return all
	}
	isHeld := make([]bool, len(all))
	for i, m := range all {
		isHeld[i] = held(m)
	}
	chosen := make([]*v1.Pod, 0, size)
	for _, first := range []bool{true, false} {
		for i, m := range all {
			if isHeld[i] == first && len(chosen) < size {
				chosen = append(chosen, m)
			}
		}
	}
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].Name < chosen[j].Name })
	return chosen
}

// holding says which of pods are held by a job (chooseMembers): bound, being submitted for, or
// members of a live gang job this process submitted or matched.
func (p *Plugin) holding(pods []*v1.Pod) func(*v1.Pod) bool {
	ours := make(map[types.UID]bool, len(pods))
	for _, m := range pods {
		ours[m.UID] = true
	}
	held := map[types.UID]bool{}
	var ids []uint32
	var members [][]types.UID
	p.mu.Lock()
	for _, m := range pods {
		if p.inflight[m.UID] {
			held[m.UID] = true
		}
	}
	for id, uids := range p.gangs {
		if slices.ContainsFunc(uids, func(u types.UID) bool { return ours[u] }) {
			ids, members = append(ids, id), append(members, uids)
		}
	}
	p.mu.Unlock()
	for i, id := range ids { // p.job takes p.mu
		if j, ok := p.job(id); ok && isLive(j) {
			for _, u := range members[i] {
				held[u] = true
			}
		}
	}
	return func(m *v1.Pod) bool { return m.Spec.NodeName != "" || held[m.UID] }
}

// beyondMinMember says why a pod of a PodGroup is not among those its job is for (more pods
// than minMember), "" when it is.
func (p *Plugin) beyondMinMember(pod *v1.Pod, g gang) string {
	all := p.gangPods(pod, g, gangFromPodGroup)
	if len(all) <= g.Size || hasPod(chooseMembers(all, g.Size, p.holding(all)), pod) {
		return ""
	}
	return fmt.Sprintf("gang %s has %d pods for minMember %d: its Slurm job is for %d of them (those bound or submitted for first, then by name), not this one",
		g.Name, len(all), g.Size, g.Size)
}

func hasPod(pods []*v1.Pod, pod *v1.Pod) bool {
	return slices.ContainsFunc(pods, func(m *v1.Pod) bool { return m.UID == pod.UID })
}

// servesPodGroups asks the API whether it serves PodGroups (the CRD is installed).
func servesPodGroups(disc discovery.DiscoveryInterface) (bool, error) {
	l, err := disc.ServerResourcesForGroupVersion(podGroupGVR.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == podGroupGVR.Resource }), nil
}

// watchPodGroups asks whether the API serves PodGroups, at start and then every recheck
// (podGroupRecheck) until it does (a failed question sooner, its error logged once a minute); then it runs their
// informer until ctx ends. The pods that waited for the first answer are let in by the lifecycle
// loop, which starts only once it came (ready) and then activates every pending pod; when the
// CRD comes later, the labelled pods are let in once the PodGroups are listed.
func (p *Plugin) watchPodGroups(ctx context.Context, disc discovery.DiscoveryInterface, dyn dynamic.Interface, recheck time.Duration) {
	logger := klog.FromContext(ctx).WithName(Name)
	var errLog logOnce
	for {
		served, err := servesPodGroups(disc)
		wait := recheck
		switch {
		case err != nil:
			if errLog.due(err, time.Now()) {
				logger.Error(err, "asking whether the API serves PodGroups; pods labelled "+wellknown.PodGroupLabel+" wait")
			}
			wait = min(podGroupRetry, recheck)
		case served:
			inf := dynamicinformer.NewFilteredDynamicInformer(dyn, podGroupGVR, metav1.NamespaceAll, 0,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
			if _, err := inf.Informer().AddEventHandler(p.activatePodGroupPods(logger)); err != nil {
				logger.Error(err, "watching PodGroups; pods seen before their PodGroup wait for the queue's retry")
			}
			later := p.podGroups.current() == podGroupsAbsent
			p.podGroups.serve(inf.Lister(), inf.Informer().HasSynced)
			logger.Info("reading PodGroups: the pods of one are a gang of its minMember", "resource", podGroupGVR.GroupResource().String())
			if later {
				go func() {
					if cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
						p.activate(logger, p.podGroupPods("", ""))
					}
				}()
			}
			inf.Informer().Run(ctx.Done())
			return
		case p.podGroups.current() != podGroupsAbsent:
			p.podGroups.state.Store(int32(podGroupsAbsent))
			logger.V(1).Info("the API serves no PodGroups: the label is not read until it does", "label", wellknown.PodGroupLabel)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// podGroupPods are this scheduler's unbound live pods labelled for PodGroup namespace/name
// (any PodGroup when name is "", in any namespace when namespace is "").
func (p *Plugin) podGroupPods(namespace, name string) []*v1.Pod {
	sel := labels.Set{wellknown.PodGroupLabel: name}.AsSelector()
	if name == "" {
		req, err := labels.NewRequirement(wellknown.PodGroupLabel, selection.Exists, nil)
		if err != nil {
			return nil
		}
		sel = labels.NewSelector().Add(*req)
	}
	var all []*v1.Pod
	if namespace == "" {
		all, _ = p.pods.List(sel)
	} else {
		all, _ = p.pods.Pods(namespace).List(sel)
	}
	var out []*v1.Pod
	for _, pod := range all {
		if p.waitingHere(pod) {
			out = append(out, pod)
		}
	}
	return out
}

// activatePodGroupPods lets a PodGroup's pending pods back into the queue when it reaches the
// cache or its minMember changes: pods seen before their PodGroup wait for it.
func (p *Plugin) activatePodGroupPods(logger klog.Logger) cache.ResourceEventHandler {
	wake := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			p.activate(logger, p.podGroupPods(u.GetNamespace(), u.GetName()))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { wake(obj) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 {
				return
			}
			// Not at every status update (the coscheduling controller writes one per pod change).
			was, _ := minMember(o)
			now, _ := minMember(n)
			if was != now {
				wake(n)
			}
		},
	}
}

// podGroupMemberGone lets the other pending pods of a PodGroup back into the queue when one of
// its pods is deleted or finishes: a pod beyond minMember may now be one of those its job is
// for, and its condition should say what it waits for now.
func (p *Plugin) podGroupMemberGone(logger klog.Logger) cache.ResourceEventHandler {
	gone := func(pod *v1.Pod) {
		if name := pod.Labels[wellknown.PodGroupLabel]; name != "" && pod.Spec.SchedulerName == p.scheduler {
			p.activate(logger, slices.DeleteFunc(p.podGroupPods(pod.Namespace, name), func(m *v1.Pod) bool { return m.UID == pod.UID }))
		}
	}
	return onPodGone(gone)
}
