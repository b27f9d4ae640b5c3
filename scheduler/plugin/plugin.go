// Package plugin is sunk-scheduler's kube-scheduler framework plugin. A pod that names the
// scheduler becomes a Slurm placeholder job; Slurm decides where it runs, among the Kubernetes
// nodes that pass every other filter (taints, affinity, volumes, resources); the pod is bound
// to the Kubernetes node that hosts the Slurm node the job runs on. A lifecycle loop keeps pods
// and jobs together both ways (docs/scheduler.md).
package plugin

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
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
	// SlurmURL of slurmrestd, e.g. https://c1-restapi.slurm.svc:6820: https for a
	// SlurmCluster with spec.tls (the default), verified against the cluster's CA (CASecret
	// or CAFile) and the URL's host name.
	SlurmURL string `json:"slurmURL"`
	// APIVersion of slurmrestd's API. Empty (the default): the newest version both the
	// plugin and slurmrestd know, asked of slurmrestd at the first request and again only
	// when it stops serving it (slurm.Discovering).
	APIVersion string `json:"apiVersion,omitempty"`
	// SlurmUser the JWTs name (default wellknown.SlurmUser, "slurm").
	SlurmUser string `json:"slurmUser,omitempty"`
	// JWTKeySecret names the SlurmCluster's JWT key Secret (<cluster>-jwt-key) in Namespace,
	// read through the API (a Role on that one Secret): the scheduler runs in a namespace of
	// its own. Exactly one of JWTKeySecret and JWTKeyFile is set.
	JWTKeySecret string `json:"jwtKeySecret,omitempty"`
	// JWTKeyFile holds the cluster's HS256 JWT key (jwt.key, with jwt.key.previous beside it
	// during a rotation), for a scheduler that has the key as a file.
	JWTKeyFile string `json:"jwtKeyFile,omitempty"`
	// MarkKeyFile holds the key (at least 32 bytes) of the marks on placeholder job comments
	// (trust.go): only jobs with a mark made with it are the scheduler's. It must outlive
	// restarts and upgrades, or running placeholder jobs are no longer recognised.
	MarkKeyFile string `json:"markKeyFile"`
	// Cluster is the SlurmCluster's name: compute pods labelled sunk.dev/cluster=<Cluster>.
	Cluster string `json:"cluster"`
	// Namespace of the SlurmCluster and its compute pods.
	Namespace string `json:"namespace"`
	// CASecret names the SlurmCluster's TLS Secret (<cluster>-tls) in Namespace, whose ca.crt
	// the https URLs are verified with, read through the API (a Role on that one Secret) at
	// each new connection, so a renewed CA is followed. With https URLs, exactly one of
	// CASecret and CAFile is set.
	CASecret string `json:"caSecret,omitempty"`
	// CAFile holds the cluster's CA certificates (PEM), read at each new connection.
	CAFile string `json:"caFile,omitempty"`
	// NodeWatcherURL is the cluster's node watchers' Service (https://<cluster>-nodewatch.<namespace>.svc:6830;
	// SlurmCluster spec.controller.nodeWatcher): Slurm's nodes are followed through it, each
	// answer only what changed. Empty: the node list is polled from slurmrestd.
	NodeWatcherURL string `json:"nodeWatcherURL,omitempty"`
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
	// workloadJobs are the batch/v1 Jobs, for the size of a JobSet's gang (jobSetGang).
	workloadJobs batchlisters.JobLister
	// podGroups are the scheduler-plugins PodGroups, for the size of theirs (podGroupGang).
	podGroups *podGroupCache
	computes  labels.Selector
	// topo is where the compute pods run (topology.go).
	topo topologyCache
	// shapes is the digest of the Slurm nodes' shapes that refusalAsk includes (shapes.go).
	shapes nodeShapes
	// mark signs the comments of the jobs this scheduler submits; untrusted are the jobs with
	// a placeholder comment that fail the trust check (trust.go), reported once each.
	mark      marker
	untrusted untrustedJobs
	// policy is the SlurmCluster's scheduler policy; denied the refusals shown on pods.
	policy policySource
	denied denials

	mu sync.Mutex
	// byKey files jobs under what their comment names: a pod (podJobKey) or a gang (gangJobKey).
	byKey map[string]map[uint32]bool
	// gangs holds the members (in node order) of the gang jobs this process submitted or matched
	// to a gang in the pod cache; a member that is gone later is then still known to be missing.
	gangs map[uint32][]types.UID
	// submitted holds jobs this process submitted that the job list has not shown yet, so that a
	// pod never gets a second job in that window.
	submitted map[uint32]submission
	// immediate are the jobs Slurm started at once, while the job list shows them: their pods'
	// binding names the job, and no SlurmAllocated event says it again (see PostBind).
	immediate map[uint32]bool
	// inflight pods have a submission under way; refused pods had their job refused by Slurm
	// (refusal.go: shown while it stands; the pod asks again once something it depends on changed).
	inflight map[types.UID]bool
	refused  map[types.UID]refusal
	// lastJob is the last job seen or submitted for a key, checked with Slurm before another.
	lastJob map[string]uint32
	// submitSlots bounds the submissions in flight, and cancels the cancellations, each on its
	// own: a burst of deleted pods (hundreds of cancels) must not hold up new pods' submissions.
	submitSlots chan struct{}
	cancels     *cancelQueue
	// allocationRetry is the longest first wait before a busy immediate allocation is asked
	// again (place); allocations holds them until resources are freed.
	allocationRetry time.Duration
	allocationQueue *allocationQueue
	releases        *releaseClock
	// conditionSlots bounds the pending-reason writes in flight (see showPending).
	conditionSlots chan struct{}
	// jobsChanged wakes the lifecycle loop when a job list changed something, so that a job's
	// start reaches its pods at once instead of at the loop's next tick.
	jobsChanged chan struct{}
	// nodeLocks serialise this process's writes of each node's lock taints.
	nodeLocks map[string]*sync.Mutex
	lc        lifecycle
	settled   *settledJobs
	verdicts  verdicts // placeholderKeys's, per job
}

type submission struct {
	job slurm.Job
	at  time.Time
}

var (
	_ framework.PreEnqueuePlugin  = &Plugin{}
	_ framework.PreFilterPlugin   = &Plugin{}
	_ framework.FilterPlugin      = &Plugin{}
	_ framework.ReservePlugin     = &Plugin{}
	_ framework.PermitPlugin      = &Plugin{}
	_ framework.PreBindPlugin     = &Plugin{}
	_ framework.BindPlugin        = &Plugin{}
	_ framework.PostBindPlugin    = &Plugin{}
	_ framework.EnqueueExtensions = &Plugin{}
)

// New builds the plugin from its args and starts the Slurm informers and the lifecycle loop.
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args := Args{}
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if err := args.validate(); err != nil {
		return nil, err
	}
	if args.SlurmUser == "" {
		args.SlurmUser = wellknown.SlurmUser
	}
	if args.PollInterval.Duration == 0 {
		args.PollInterval.Duration = time.Second
	}
	if args.GangTimeout.Duration == 0 {
		args.GangTimeout.Duration = time.Minute
	}
	mark, err := loadMarker(args.MarkKeyFile)
	if err != nil {
		return nil, err
	}
	m, err := registerMetrics()
	if err != nil {
		return nil, err
	}
	tokens, err := jwtTokens(ctx, h.ClientSet(), args)
	if err != nil {
		return nil, err
	}
	roots := caRoots(ctx, h.ClientSet(), args)
	restTLS, err := clientTLS(args, args.SlurmURL, roots)
	if err != nil {
		return nil, err
	}
	// As many connections as submits and cancels run at once plus one for each informer's poll,
	// within slurmrestd's share for each sunk component.
	c, err := slurm.NewDiscovering(slurm.Config{URL: args.SlurmURL, APIVersion: args.APIVersion, Tokens: tokens, Metrics: m,
		MaxConns: maxSubmits + maxCancels + slurm.JobInformerConns + 2, Cluster: metricCluster(args), TLS: restTLS})
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, err
	}
	nodes, err := nodeInformer(c, args, tokens, roots)
	if err != nil {
		return nil, err
	}
	p := newPlugin(ctx, h, args, c, nodes, mark, newClusterInformer(dyn, args.Namespace, args.Cluster))
	go p.watchPodGroups(ctx, h.ClientSet().Discovery(), dyn, podGroupRecheck)
	return p, nil
}

// validate names the first arg that is missing or contradicts another.
func (a Args) validate() error {
	for _, r := range []struct{ name, value string }{
		{"slurmURL", a.SlurmURL}, {"markKeyFile", a.MarkKeyFile}, {"cluster", a.Cluster}, {"namespace", a.Namespace},
	} {
		if r.value == "" {
			return fmt.Errorf("%s args: %s is required", Name, r.name)
		}
	}
	if (a.JWTKeySecret == "") == (a.JWTKeyFile == "") {
		return fmt.Errorf("%s args: set exactly one of jwtKeySecret (%q) and jwtKeyFile (%q)", Name, a.JWTKeySecret, a.JWTKeyFile)
	}
	return a.validateTLS()
}

func newPlugin(ctx context.Context, h framework.Handle, args Args, c slurm.Client, nodes *slurm.Informer[string, slurm.Node], mark marker, policy policySource) *Plugin {
	scheduler := "sunk-scheduler"
	if f, ok := h.(interface{ ProfileName() string }); ok {
		scheduler = f.ProfileName()
	}
	podInformer := h.SharedInformerFactory().Core().V1().Pods()
	// kube-scheduler's pod informer has no namespace index: without one, every namespaced List
	// (compute pods each cycle, gang members) scans all pods and logs a warning each time.
	if err := podInformer.Informer().AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}); err != nil {
		klog.FromContext(ctx).WithName(Name).V(2).Info("pod informer keeps its indexers", "reason", err.Error())
	}
	p := pluginOn(h, args, scheduler, c, slurm.NewJobInformer(c, slurm.InformerOptions{Interval: args.PollInterval.Duration}),
		nodes, podInformer.Lister(), mark, policy)
	if _, err := podInformer.Informer().AddEventHandler(p.topologyHandler()); err != nil {
		klog.FromContext(ctx).WithName(Name).Error(err, "watching compute pods; the topology is listed at each cycle")
	} else {
		p.topo.watch()
	}
	if _, err := podInformer.Informer().AddEventHandler(p.podGoneHandler()); err != nil {
		klog.FromContext(ctx).WithName(Name).Error(err, "watching pod deletions; they are seen at the lifecycle loop's ticks")
	}
	if _, err := podInformer.Informer().AddEventHandler(p.podGroupMemberGone(klog.FromContext(ctx).WithName(Name))); err != nil {
		klog.FromContext(ctx).WithName(Name).Error(err, "watching pod deletions; pods beyond a PodGroup's minMember wait for the queue's retry")
	}
	// pluginOn asked the same shared informer for its lister: kube-scheduler starts it with
	// the pods' and waits for both before the first cycle.
	jobInformer := h.SharedInformerFactory().Batch().V1().Jobs().Informer()
	if _, err := jobInformer.AddEventHandler(p.activateJobPods(klog.FromContext(ctx).WithName(Name))); err != nil {
		klog.FromContext(ctx).WithName(Name).Error(err, "watching Jobs; pods seen before their JobSet Job wait for the queue's retry")
	}
	p.watchNodeRoom()
	p.shapes.watch(p.nodes)
	p.jobs.AddHandler(slurm.Handler[slurm.Job]{
		OnAdd: func(j slurm.Job) {
			p.index(&j, true)
			p.lc.sawJob(p, &j)
			p.sawFreed(nil, &j)
			p.wakeLifecycle()
		},
		OnUpdate: func(old, j slurm.Job) {
			p.settled.changed(j.ID)
			p.index(&j, true)
			p.lc.sawJob(p, &j)
			p.sawFreed(&old, &j)
			p.wakeLifecycle()
		},
		OnDelete: func(j slurm.Job) {
			if isLive(&j) && p.placeholderKeys(&j) != nil {
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
			p.settled.changed(j.ID)
			p.releases.forget(j.ID)
			p.wakeLifecycle()
		},
	})
	// The loop matches gang jobs to gangs in the pod cache: a JobSet's gang needs its Job, a
	// PodGroup's gang its PodGroup (or the answer that the API serves none: watchPodGroups).
	go p.run(ctx, func() bool {
		return podInformer.Informer().HasSynced() && jobInformer.HasSynced() && p.podGroups.ready()
	})
	return p
}

// pluginOn is a plugin on these clients and caches with its bookkeeping empty, before its
// handlers and its loop: production's and the tests' alike.
func pluginOn(h framework.Handle, args Args, scheduler string, c slurm.Client, jobs *slurm.Informer[uint32, slurm.Job],
	nodes *slurm.Informer[string, slurm.Node], pods corelisters.PodLister, mark marker, policy policySource) *Plugin {
	return &Plugin{
		h: h, args: args, scheduler: scheduler, slurm: c, mark: mark,
		untrusted: untrustedJobs{seen: map[uint32]time.Time{}},
		policy:    policy,
		denied:    denials{last: map[types.UID]string{}},
		jobs:      jobs,
		nodes:     nodes,
		pods:      pods,
		computes:  computeSelector(args),

		workloadJobs: h.SharedInformerFactory().Batch().V1().Jobs().Lister(),
		podGroups:    &podGroupCache{},

		byKey:     map[string]map[uint32]bool{},
		gangs:     map[uint32][]types.UID{},
		submitted: map[uint32]submission{},
		immediate: map[uint32]bool{},
		inflight:  map[types.UID]bool{},
		lastJob:   map[string]uint32{},
		refused:   map[types.UID]refusal{},
		lc:        newLifecycle(),
		settled:   newSettledJobs(),
		nodeLocks: map[string]*sync.Mutex{},

		submitSlots:     make(chan struct{}, maxSubmits),
		allocationRetry: 500 * time.Millisecond,
		allocationQueue: newAllocationQueue(),
		releases:        newReleaseClock(),
		cancels:         newCancelQueue(c.CancelJobs, maxCancels),

		conditionSlots: make(chan struct{}, maxConditionWrites),
		jobsChanged:    make(chan struct{}, 1),
	}
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

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

// computeSelector selects the cluster's compute pods.
func computeSelector(args Args) labels.Selector {
	return labels.SelectorFromSet(labels.Set{wellknown.LabelCluster: args.Cluster, wellknown.LabelComponent: wellknown.ComponentCompute})
}

// metricCluster is the cluster label of the REST metrics, namespace/name like the operator's
// and the syncer's.
func metricCluster(args Args) string {
	if args.Namespace == "" {
		return args.Cluster
	}
	return args.Namespace + "/" + args.Cluster
}
