// Package plugin is sunk-scheduler's kube-scheduler framework plugin. A pod that names the
// scheduler becomes a Slurm placeholder job; Slurm decides where it runs, among the Kubernetes
// nodes that pass every other filter (taints, affinity, volumes, resources); the pod is bound
// to the Kubernetes node that hosts the Slurm node the job runs on. A lifecycle loop keeps pods
// and jobs together both ways (docs/scheduler.md).
package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// Name is the plugin's name in the KubeSchedulerConfiguration.
const Name = "SunkSlurm"

// Args configure the plugin (pluginConfig args in the KubeSchedulerConfiguration).
type Args struct {
	// SlurmURL of slurmrestd, e.g. http://c1-restapi.slurm:6820.
	SlurmURL string `json:"slurmURL"`
	// APIVersion of slurmrestd's API (v0.0.41 by default).
	APIVersion string `json:"apiVersion,omitempty"`
	// SlurmUser the JWTs name (default "slurm").
	SlurmUser string `json:"slurmUser,omitempty"`
	// JWTKeyFile holds the cluster's HS256 JWT key (the SlurmCluster's jwt key Secret).
	JWTKeyFile string `json:"jwtKeyFile"`
	// Cluster is the SlurmCluster's name: compute pods labelled sunk.dev/cluster=<Cluster>.
	Cluster string `json:"cluster"`
	// Namespace of the compute pods ("" for any).
	Namespace string `json:"namespace,omitempty"`
	// PollInterval of the Slurm job and node lists (default 1s).
	PollInterval metav1.Duration `json:"pollInterval,omitempty"`
	// GangTimeout is how long the bound-together members of a gang wait for each other at Permit
	// (default 60s); after it they are all sent back to the queue.
	GangTimeout metav1.Duration `json:"gangTimeout,omitempty"`
}

// Plugin is the framework plugin and the lifecycle loop.
type Plugin struct {
	h         framework.Handle
	args      Args
	scheduler string // the profile's scheduler name
	slurm     slurm.Client
	jobs      *slurm.Informer[uint32, slurm.Job]
	nodes     *slurm.Informer[string, slurm.Node]
	pods      corelisters.PodLister
	computes  labels.Selector

	mu sync.Mutex
	// byUID maps a pod to the jobs whose comment names it (normally one).
	byUID map[types.UID]map[uint32]bool
	// submitted holds jobs this process submitted that the job list has not shown yet, so that a
	// pod never gets a second job in that window.
	submitted map[uint32]submission
	// inflight pods have a submission under way; refused pods had their job refused by Slurm
	// (the message is shown once, then the pod may try again). slurmSem bounds the submissions
	// and cancellations in flight.
	inflight map[types.UID]bool
	refused  map[types.UID]string
	// lastJob is the last job seen or submitted for a pod, checked with Slurm before another.
	lastJob  map[types.UID]uint32
	slurmSem chan struct{}
	lc       lifecycle
}

type submission struct {
	job slurm.Job
	at  time.Time
}

var (
	_ framework.PreFilterPlugin   = &Plugin{}
	_ framework.FilterPlugin      = &Plugin{}
	_ framework.ReservePlugin     = &Plugin{}
	_ framework.PermitPlugin      = &Plugin{}
	_ framework.PreBindPlugin     = &Plugin{}
	_ framework.PostBindPlugin    = &Plugin{}
	_ framework.EnqueueExtensions = &Plugin{}
)

// New builds the plugin from its args and starts the Slurm informers and the lifecycle loop.
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args := Args{}
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if args.SlurmURL == "" || args.JWTKeyFile == "" || args.Cluster == "" {
		return nil, fmt.Errorf("%s args: slurmURL, jwtKeyFile and cluster are required", Name)
	}
	if args.SlurmUser == "" {
		args.SlurmUser = "slurm"
	}
	if args.PollInterval.Duration == 0 {
		args.PollInterval.Duration = time.Second
	}
	if args.GangTimeout.Duration == 0 {
		args.GangTimeout.Duration = time.Minute
	}
	m, err := registerMetrics()
	if err != nil {
		return nil, err
	}
	tokens, err := slurm.NewJWTSourceFromFile(args.SlurmUser, args.JWTKeyFile)
	if err != nil {
		return nil, err
	}
	// Eight connections: as many as submits and cancels run at once (the informers'
	// polls take turns with them), within slurmrestd's share for each sunk component.
	c, err := slurm.New(slurm.Config{URL: args.SlurmURL, APIVersion: args.APIVersion, Tokens: tokens, Metrics: m,
		MaxConns: 8, Cluster: args.Namespace + "/" + args.Cluster})
	if err != nil {
		return nil, err
	}
	return newPlugin(ctx, h, args, c), nil
}

func newPlugin(ctx context.Context, h framework.Handle, args Args, c slurm.Client) *Plugin {
	scheduler := "sunk-scheduler"
	if f, ok := h.(interface{ ProfileName() string }); ok {
		scheduler = f.ProfileName()
	}
	podInformer := h.SharedInformerFactory().Core().V1().Pods()
	p := &Plugin{
		h: h, args: args, scheduler: scheduler, slurm: c,
		jobs:      slurm.NewJobInformer(c, slurm.InformerOptions{Interval: args.PollInterval.Duration}),
		nodes:     slurm.NewNodeInformer(c, slurm.InformerOptions{Interval: args.PollInterval.Duration}),
		pods:      podInformer.Lister(),
		computes:  labels.SelectorFromSet(labels.Set{wellknown.LabelCluster: args.Cluster, wellknown.LabelComponent: wellknown.ComponentCompute}),
		byUID:     map[types.UID]map[uint32]bool{},
		submitted: map[uint32]submission{},
		inflight:  map[types.UID]bool{},
		lastJob:   map[types.UID]uint32{},
		refused:   map[types.UID]string{},
		slurmSem:  make(chan struct{}, maxSlurmCalls),
		lc:        newLifecycle(),
	}
	_ = podInformer.Informer() // registered before the factory starts
	p.jobs.AddHandler(slurm.Handler[slurm.Job]{
		OnAdd:    func(j slurm.Job) { p.index(&j, true) },
		OnUpdate: func(_, j slurm.Job) { p.index(&j, true) },
		OnDelete: func(j slurm.Job) {
			if isLive(&j) && podUIDsOf(&j) != nil {
				// Seen with Slurm 24.11: live jobs drop out of one list and are back in the
				// next. Fail closed: keep the last record (as if just submitted) until the list
				// shows the job again or it expires; a new submission asks Slurm first.
				klog.FromContext(ctx).WithName(Name).V(1).Info("a live placeholder job left the job list", "job", j.ID, "state", j.State)
				p.mu.Lock()
				p.submitted[j.ID] = submission{at: time.Now(), job: j}
				p.mu.Unlock()
				return
			}
			p.index(&j, false)
		},
	})
	go p.run(ctx, podInformer.Informer().HasSynced)
	return p
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

func (p *Plugin) index(j *slurm.Job, present bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.submitted, j.ID)
	for _, u := range podUIDsOf(j) {
		uid := types.UID(u)
		if present {
			if isLive(j) {
				p.lastJob[uid] = j.ID
			}
			if p.byUID[uid] == nil {
				p.byUID[uid] = map[uint32]bool{}
			}
			p.byUID[uid][j.ID] = true
		} else if m := p.byUID[uid]; m != nil {
			delete(m, j.ID)
			if len(m) == 0 {
				delete(p.byUID, uid)
			}
		}
	}
}

// jobOf is the job of a pod: a live one if there is one, else the newest that ended.
func (p *Plugin) jobOf(uid types.UID) (*slurm.Job, bool) {
	p.mu.Lock()
	ids := make([]uint32, 0, len(p.byUID[uid]))
	for id := range p.byUID[uid] {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	var best *slurm.Job
	for _, id := range ids {
		j, ok := p.job(id)
		if !ok {
			continue
		}
		if best == nil || (isLive(j) && !isLive(best)) || (isLive(j) == isLive(best) && j.ID > best.ID) {
			best = j
		}
	}
	return best, best != nil
}

// job is a job from the list, or one this process submitted that the list does not show yet.
func (p *Plugin) job(id uint32) (*slurm.Job, bool) {
	if j, ok := p.jobs.Get(id); ok {
		return &j, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.submitted[id]; ok {
		j := s.job
		return &j, true
	}
	return nil, false
}

// isLive: the job holds or waits for an allocation.
func isLive(j *slurm.Job) bool {
	switch j.BaseState() {
	case "PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT":
		return !j.HasState("COMPLETING") || j.BaseState() == "RUNNING"
	}
	return false
}

func isRunning(j *slurm.Job) bool {
	return j.BaseState() == "RUNNING" && !j.HasState("CONFIGURING") && j.Nodes != ""
}

// topology is where compute pods run: Slurm node name ↔ Kubernetes node name.
type topology struct {
	hostOf map[string]string   // Slurm node → Kubernetes node
	onNode map[string][]string // Kubernetes node → Slurm nodes
}

func (p *Plugin) topology() (*topology, error) {
	var pods []*v1.Pod
	var err error
	if p.args.Namespace != "" {
		pods, err = p.pods.Pods(p.args.Namespace).List(p.computes)
	} else {
		pods, err = p.pods.List(p.computes)
	}
	if err != nil {
		return nil, err
	}
	t := &topology{hostOf: map[string]string{}, onNode: map[string][]string{}}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
			continue
		}
		name := pod.Labels[wellknown.LabelSlurmNode]
		if name == "" {
			name = pod.Name
		}
		t.hostOf[name] = pod.Spec.NodeName
		t.onNode[pod.Spec.NodeName] = append(t.onNode[pod.Spec.NodeName], name)
	}
	return t, nil
}

const stateKey framework.StateKey = Name

// cycle is what one scheduling cycle learns about its pod.
type cycle struct {
	spec      *podSpec
	topo      *topology
	job       *slurm.Job // nil: no job yet
	slurmNode string     // the Slurm node the pod belongs on, when the job runs
	mu        sync.Mutex
	feasible  sets.Set[string] // Kubernetes nodes that passed every filter (this plugin's is last)
}

func (c *cycle) Clone() framework.StateData { return c }

func cycleOf(state *framework.CycleState) (*cycle, *framework.Status) {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	return d.(*cycle), nil
}

func unresolvable(format string, a ...any) *framework.Status {
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf(format, a...))
}

// PreFilter parses the pod, finds its job and narrows the nodes: every node hosting a compute
// pod before the job exists, the node hosting the job's Slurm node once it runs.
func (p *Plugin) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	spec, err := parsePod(pod)
	if err != nil {
		p.lc.badSpec(p, pod, err)
		return nil, unresolvable("%v", err)
	}
	if !p.jobs.HasSynced() || !p.nodes.HasSynced() {
		return nil, framework.NewStatus(framework.Unschedulable, "waiting for the first list of Slurm jobs and nodes")
	}
	topo, err := p.topology()
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	c := &cycle{spec: spec, topo: topo, feasible: sets.New[string]()}
	state.Write(stateKey, c)
	p.mu.Lock()
	inflight := p.inflight[pod.UID]
	refused, wasRefused := p.refused[pod.UID]
	delete(p.refused, pod.UID) // reported once; the next attempt submits again
	p.mu.Unlock()
	if inflight {
		return nil, framework.NewStatus(framework.Unschedulable, "submitting the Slurm job")
	}
	if wasRefused {
		return nil, unresolvable("Slurm refused the job: %s", refused)
	}
	job, ok := p.jobOf(pod.UID)
	if !ok {
		if len(topo.onNode) == 0 {
			return nil, unresolvable("no compute pod of SlurmCluster %s is running", p.args.Cluster)
		}
		return &framework.PreFilterResult{NodeNames: sets.KeySet(topo.onNode)}, nil
	}
	c.job = job
	switch {
	case isRunning(job):
		node, err := slurmNodeFor(pod, job)
		if err != nil {
			return nil, unresolvable("Slurm job %d: %v", job.ID, err)
		}
		host, ok := topo.hostOf[node]
		if !ok {
			return nil, unresolvable("Slurm job %d runs on %s, which no compute pod of SlurmCluster %s hosts", job.ID, node, p.args.Cluster)
		}
		c.slurmNode = node
		return &framework.PreFilterResult{NodeNames: sets.New(host)}, nil
	case isLive(job):
		return nil, unresolvable("%s", pendingMessage(job))
	}
	return nil, unresolvable("Slurm job %d ended (%s)", job.ID, job.BaseState())
}

// pendingMessage is Slurm's pending reason in words.
func pendingMessage(j *slurm.Job) string {
	reason := j.StateReason
	if reason == "" || reason == "None" {
		reason = j.BaseState()
	}
	msg := fmt.Sprintf("Slurm job %d is %s: %s", j.ID, j.BaseState(), reason)
	if j.StateDescription != "" {
		msg += " (" + j.StateDescription + ")"
	}
	return msg
}

// slurmNodeFor is the Slurm node of a pod in its running job: the job's i-th node for the
// i-th pod its comment names (gang members in name order; a single pod is the first).
func slurmNodeFor(pod *v1.Pod, job *slurm.Job) (string, error) {
	nodes, err := slurm.ExpandHostlist(job.Nodes)
	if err != nil {
		return "", err
	}
	i := slices.Index(podUIDsOf(job), string(pod.UID))
	if i < 0 || i >= len(nodes) {
		return "", fmt.Errorf("pod %s is member %d of a job on %d nodes (%s)", pod.UID, i, len(nodes), job.Nodes)
	}
	return nodes[i], nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (p *Plugin) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter admits nodes that host a compute pod of the cluster (the job's, once it runs). It is
// configured last among the filters, so a node it sees has passed all the others: it records
// them, and Reserve tells Slurm to avoid every other node.
func (p *Plugin) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	c, st := cycleOf(state)
	if st != nil {
		return st
	}
	node := ni.Node().Name
	slurmNodes := c.topo.onNode[node]
	if len(slurmNodes) == 0 {
		return unresolvable("node hosts no compute pod of SlurmCluster %s", p.args.Cluster)
	}
	if c.slurmNode != "" && !slices.Contains(slurmNodes, c.slurmNode) {
		return unresolvable("Slurm job %d runs on %s, not on this node", c.job.ID, c.slurmNode)
	}
	c.mu.Lock()
	c.feasible.Insert(node)
	c.mu.Unlock()
	return nil
}

// Reserve submits the job when the pod has none (asynchronously, see submit): Slurm may use the
// Slurm nodes hosted on the nodes that passed the filters and no other. The pod then waits
// (Unschedulable) until the lifecycle loop sees the job run and activates it.
func (p *Plugin) Reserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	c, st := cycleOf(state)
	if st != nil {
		return st
	}
	if c.job != nil {
		return nil
	}
	members := []*v1.Pod{pod}
	if c.spec.Gang.Size > 0 {
		members = p.gangMembers(pod, c.spec.Gang)
		switch {
		case len(members) < c.spec.Gang.Size:
			return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("gang %s has %d of %d pods", c.spec.Gang.Name, len(members), c.spec.Gang.Size))
		case len(members) > c.spec.Gang.Size:
			return unresolvable("gang %s has %d pods, more than its size %d", c.spec.Gang.Name, len(members), c.spec.Gang.Size)
		}
		for _, m := range members {
			p.mu.Lock()
			busy := p.inflight[m.UID]
			p.mu.Unlock()
			if busy {
				return framework.NewStatus(framework.Unschedulable, "submitting the gang's Slurm job")
			}
			if j, ok := p.jobOf(m.UID); ok && isLive(j) {
				return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("gang %s has Slurm job %d", c.spec.Gang.Name, j.ID))
			}
		}
	}
	c.mu.Lock()
	allowed := sets.New[string]()
	for node := range c.feasible {
		allowed.Insert(c.topo.onNode[node]...)
	}
	c.mu.Unlock()
	var excluded []string
	for _, n := range p.nodes.List() {
		if !allowed.Has(n.Name) {
			excluded = append(excluded, n.Name)
		}
	}
	sort.Strings(excluded)
	uids := make([]string, len(members))
	for i, m := range members {
		uids[i] = string(m.UID)
	}
	js := c.spec.Job
	js.Comment = jobComment(uids)
	js.ExcludedNodes = excluded
	p.mu.Lock()
	for _, u := range uids {
		p.inflight[types.UID(u)] = true
	}
	p.mu.Unlock()
	go p.submit(js, members)
	return framework.NewStatus(framework.Unschedulable, "submitting the Slurm job")
}

// maxSlurmCalls bounds the submissions and cancellations in flight to slurmrestd.
const maxSlurmCalls = 8

// submit submits a job off the scheduling cycle (a Slurm round trip must not hold up other pods).
// Until Slurm has answered, PreFilter holds the pods back, so a pod never gets two jobs.
func (p *Plugin) submit(js slurm.JobSubmit, members []*v1.Pod) {
	p.slurmSem <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	res, existing, err := p.submitOnce(ctx, js, members)
	cancel()
	<-p.slurmSem
	p.mu.Lock()
	for _, m := range members {
		delete(p.inflight, m.UID)
	}
	switch {
	case err == nil:
		rec := slurm.Job{ID: res.JobID, State: []string{"PENDING"}, StateReason: "Submitted", Comment: js.Comment}
		if existing != nil {
			rec = *existing
		}
		p.submitted[res.JobID] = submission{at: time.Now(), job: rec}
		for _, m := range members {
			if p.byUID[m.UID] == nil {
				p.byUID[m.UID] = map[uint32]bool{}
			}
			p.byUID[m.UID][res.JobID] = true
		}
	case !errors.Is(err, slurm.ErrUnavailable):
		for _, m := range members {
			p.refused[m.UID] = err.Error()
		}
	}
	p.mu.Unlock()
	logger := klog.Background().WithName(Name)
	switch {
	case existing != nil:
		// The list had lost the job: take it back, and let the pods see it.
		logger.Info("kept the live Slurm job of a pod instead of submitting another", "job", res.JobID)
	case err == nil:
		// The lifecycle loop activates the pods when the job list shows the job.
		jobsSubmitted.Inc()
		for _, m := range members {
			p.lc.event(p, m, v1.EventTypeNormal, "SlurmJobSubmitted", "submitted Slurm job %d (%s)", res.JobID, js.Name)
		}
		return
	case errors.Is(err, slurm.ErrUnavailable):
		// Slurm did not answer: try again in a while.
		logger.Error(err, "submitting a Slurm job", "name", js.Name)
		time.AfterFunc(2*time.Second, func() { p.activate(logger, members) })
		return
	default:
		for _, m := range members {
			p.lc.event(p, m, v1.EventTypeWarning, "SlurmSubmitFailed", "Slurm refused the job: %v", err)
		}
	}
	p.activate(logger, members)
}

// submitOnce submits unless a member already had a job that Slurm still runs or queues (the
// job list may lag behind, or miss a job): then that job is the answer. A pod never gets two.
func (p *Plugin) submitOnce(ctx context.Context, js slurm.JobSubmit, members []*v1.Pod) (*slurm.SubmitResult, *slurm.Job, error) {
	for _, m := range members {
		p.mu.Lock()
		id, had := p.lastJob[m.UID]
		p.mu.Unlock()
		if !had {
			continue
		}
		j, err := p.slurm.GetJob(ctx, id)
		switch {
		case err == nil && isLive(j):
			return &slurm.SubmitResult{JobID: id}, j, nil
		case err != nil && !errors.Is(err, slurm.ErrNotFound):
			return nil, nil, err
		}
	}
	res, err := p.slurm.SubmitJob(ctx, js)
	if err == nil {
		p.mu.Lock()
		for _, m := range members {
			p.lastJob[m.UID] = res.JobID
		}
		p.mu.Unlock()
	}
	return res, nil, err
}

// Unreserve implements framework.ReservePlugin. A job outlives a failed cycle: the pod keeps it.
func (p *Plugin) Unreserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
}

// gangMembers are the pods of the pod's gang (same namespace and gang name, this scheduler,
// not finished or being deleted), by name.
func (p *Plugin) gangMembers(pod *v1.Pod, g gang) []*v1.Pod {
	all, _ := p.pods.Pods(pod.Namespace).List(labels.Everything())
	var out []*v1.Pod
	for _, m := range all {
		if m.Spec.SchedulerName == pod.Spec.SchedulerName && m.Annotations[wellknown.AnnotationGang] == g.Name && alive(m) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func alive(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// Permit binds a gang all or nothing: each member waits until every member has reached Permit
// (or is bound already); then all are let through together. A member that does not get there
// within GangTimeout sends the waiting ones back to the queue.
func (p *Plugin) Permit(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (*framework.Status, time.Duration) {
	c, st := cycleOf(state)
	if st != nil {
		return st, 0
	}
	g := c.spec.Gang
	if g.Size == 0 {
		return nil, 0
	}
	var waiting []framework.WaitingPod
	p.h.IterateOverWaitingPods(func(wp framework.WaitingPod) {
		wpod := wp.GetPod()
		if wpod.Namespace == pod.Namespace && wpod.Annotations[wellknown.AnnotationGang] == g.Name && wpod.UID != pod.UID {
			waiting = append(waiting, wp)
		}
	})
	ready := len(waiting) + 1
	for _, m := range p.gangMembers(pod, g) {
		if m.Spec.NodeName != "" && m.UID != pod.UID {
			ready++
		}
	}
	if ready < g.Size {
		return framework.NewStatus(framework.Wait, fmt.Sprintf("gang %s: %d of %d pods ready to bind", g.Name, ready, g.Size)), p.args.GangTimeout.Duration
	}
	for _, wp := range waiting {
		wp.Allow(Name)
	}
	return nil, 0
}

// PreBind records the job on the pod and, for an exclusive job, locks the node.
func (p *Plugin) PreBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	c, st := cycleOf(state)
	if st != nil {
		return st
	}
	if c.job == nil {
		return framework.AsStatus(fmt.Errorf("pod %s/%s reached PreBind without a Slurm job", pod.Namespace, pod.Name))
	}
	id := strconv.FormatUint(uint64(c.job.ID), 10)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, wellknown.AnnotationJob, id)
	if _, err := p.h.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return framework.AsStatus(err)
	}
	if c.spec.Job.Exclusive {
		if err := lockNode(ctx, p.h.ClientSet(), nodeName, id); err != nil {
			return framework.AsStatus(err)
		}
	}
	return nil
}

// PostBind records the bind latency and says where Slurm put the pod.
func (p *Plugin) PostBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
	bindLatency.Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
	if c, st := cycleOf(state); st == nil && c.job != nil {
		p.lc.event(p, pod, v1.EventTypeNormal, "SlurmAllocated", "Slurm job %d runs on Slurm node %s, hosted by node %s", c.job.ID, c.slurmNode, nodeName)
	}
}

// EventsToRegister: pods this plugin rejected come back when a compute pod appears or a node
// is added; job changes come through the lifecycle loop, which activates the pods concerned.
func (p *Plugin) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Pod, ActionType: framework.Add | framework.UpdatePodLabel}, QueueingHintFn: p.computePodHint},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}},
	}, nil
}

func (p *Plugin) computePodHint(_ klog.Logger, _ *v1.Pod, _, newObj any) (framework.QueueingHint, error) {
	if pod, ok := newObj.(*v1.Pod); ok && p.computes.Matches(labels.Set(pod.Labels)) {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}
