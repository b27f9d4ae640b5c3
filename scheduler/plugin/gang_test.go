package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/wait"
)

// hookClient is slurmfake that reports each submission and cancellation once made and, with
// a wire, also sends each submission over HTTP to a stand-in slurmrestd that hands its request
// body to the test: the bytes Slurm would get.
type hookClient struct {
	*slurmfake.Fake
	wire      slurm.Client
	bodies    chan []byte
	submitted chan uint32
	cancelled chan uint32
}

func newHookClient(t *testing.T, fk *slurmfake.Fake, wire bool) *hookClient {
	t.Helper()
	h := &hookClient{Fake: fk, bodies: make(chan []byte, 10), submitted: make(chan uint32, 10), cancelled: make(chan uint32, 100)}
	if !wire {
		return h
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/job/submit") {
			h.bodies <- body
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"job_id": 1, "errors": [], "warnings": []}`))
	}))
	t.Cleanup(srv.Close)
	tokens, err := slurm.NewJWTSource("root", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if h.wire, err = slurm.New(slurm.Config{URL: srv.URL, Tokens: tokens}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *hookClient) SubmitJob(ctx context.Context, j slurm.JobSubmit) (*slurm.SubmitResult, error) {
	if h.wire != nil {
		if _, err := h.wire.SubmitJob(ctx, j); err != nil {
			return nil, err
		}
	}
	res, err := h.Fake.SubmitJob(ctx, j)
	if err == nil {
		h.submitted <- res.JobID
	}
	return res, err
}

func (h *hookClient) CancelJobs(ctx context.Context, ids []uint32) (map[uint32]error, error) {
	failed, err := h.Fake.CancelJobs(ctx, ids)
	for _, id := range ids {
		h.cancelled <- id
	}
	return failed, err
}

// receive waits for a value from ch; the timeout only fails a test that would hang.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}

// submitGang runs a scheduling cycle for the first member of a complete gang of n and returns
// the body of the job submission it made.
func submitGang(t *testing.T, n int, opts ...func(*v1.Pod)) []byte {
	fk := slurmfake.New()
	w := newHookClient(t, fk, true)
	b := newTestBed(t, 3, w, fk)
	members := b.gang("g", n, opts...)
	state, st, passed := b.cycle(b.p, members[0])
	if !st.IsSuccess() || len(passed) != 3 {
		t.Fatalf("gang of %d: PreFilter %v, nodes %v", n, st, passed)
	}
	if st := b.p.Reserve(context.Background(), state, members[0], passed[0]); st.Code() != framework.Unschedulable {
		t.Fatalf("gang of %d: Reserve %v, want a submission", n, st)
	}
	return receive(t, w.bodies, fmt.Sprintf("submission for the gang of %d", n))
}

// exclusive members each take a whole node; small ones ask for 10m CPU and 10Mi.
func exclusive(p *v1.Pod) { p.Annotations[wellknown.AnnotationExclusive] = "true" }

func small(p *v1.Pod) {
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("10Mi")}}}}
}

// Nothing in a gang's Slurm request grows with the gang: the request for 5,000 members is as
// long as the one for 10 but for the digits of the counts themselves (tasks, and minimum and
// maximum nodes for members that take a node each). The first comment format listed every
// member (37 bytes each) and Slurm refused gangs of more than 27 (comment over 1,024 bytes).
func TestGangRequestSizeDoesNotGrow(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []func(*v1.Pod)
		// want: the counts in the request for 10 and for 5,000 members (0: absent)
		want map[string][2]float64
		// memPerCPU: memory_per_cpu for 10 and 5,000 members (MiB; 0: absent)
		memPerCPU [2]float64
	}{
		{"a node each (exclusive)", []func(*v1.Pod){exclusive},
			map[string][2]float64{"tasks": {10, 5000}, "minimum_nodes": {10, 5000}, "maximum_nodes": {10, 5000}}, [2]float64{}},
		{"packed, one CPU each", nil,
			map[string][2]float64{"tasks": {10, 5000}, "minimum_nodes": {1, 1}, "maximum_nodes": {0, 0}}, [2]float64{}},
		// 100 members of 10m to a task of one CPU: 10 members are one task of 100 MiB (10 × 10Mi),
		// 5,000 are 50 tasks of 1,000 MiB.
		{"packed, 10m CPU and 10Mi each", []func(*v1.Pod){small},
			map[string][2]float64{"tasks": {1, 50}, "minimum_nodes": {1, 1}, "maximum_nodes": {0, 0}}, [2]float64{100, 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sizes := [2]int{10, 5000}
			var bodies, zeroed [2][]byte
			for i, n := range sizes {
				bodies[i] = submitGang(t, n, tc.opts...)
				var req struct {
					Job map[string]any `json:"job"`
				}
				if err := json.Unmarshal(bodies[i], &req); err != nil {
					t.Fatal(err)
				}
				for k, want := range tc.want {
					got, _ := req.Job[k].(float64)
					if got != want[i] {
						t.Fatalf("gang of %d: %s = %v, want %v", n, k, req.Job[k], want[i])
					}
					delete(req.Job, k)
				}
				mem, _ := req.Job["memory_per_cpu"].(map[string]any)
				if got, _ := mem["number"].(float64); got != tc.memPerCPU[i] {
					t.Fatalf("gang of %d: memory_per_cpu %v, want %v", n, req.Job["memory_per_cpu"], tc.memPerCPU[i])
				}
				delete(req.Job, "memory_per_cpu")
				if c, _ := req.Job["comment"].(string); !strings.HasPrefix(c, gangPrefix) || len(c) > 128 { // key and mark: 91 bytes
					t.Fatalf("gang of %d: comment %q", n, c)
				}
				out, err := json.Marshal(req)
				if err != nil {
					t.Fatal(err)
				}
				zeroed[i] = out
			}
			t.Logf("submission: %d bytes for 10 members, %d bytes for 5,000", len(bodies[0]), len(bodies[1]))
			if len(zeroed[0]) != len(zeroed[1]) {
				t.Errorf("without the counts: %d bytes for 10 members, %d for 5,000\n%s\n%s", len(zeroed[0]), len(zeroed[1]), zeroed[0], zeroed[1])
			}
		})
	}
}

// packedNode spreads a packed gang's members over the job's nodes by the CPUs it holds on each.
func TestPackedNode(t *testing.T) {
	alloc := []slurm.NodeAllocation{{Node: "n1", CPUs: 2}, {Node: "n2", CPUs: 1}, {Node: "n3", CPUs: 2}}
	for _, tc := range []struct {
		i, pack, cpusPerTask int
		want                 string
	}{
		{0, 1, 1, "n1"}, {1, 1, 1, "n1"}, {2, 1, 1, "n2"}, {3, 1, 1, "n3"}, {4, 1, 1, "n3"},
		{199, 100, 1, "n1"}, {200, 100, 1, "n2"}, {299, 100, 1, "n2"}, {300, 100, 1, "n3"}, {499, 100, 1, "n3"},
		{0, 1, 2, "n1"}, {1, 1, 2, "n3"}, // a task of 2 CPUs does not fit n2's one
		{500, 100, 1, ""}, {2, 1, 2, ""}, // more members than the allocation holds
	} {
		got, err := packedNode(alloc, tc.i, tc.pack, tc.cpusPerTask)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("member %d, %d to a task of %d CPUs: %q, %v; want %q", tc.i, tc.pack, tc.cpusPerTask, got, err, tc.want)
		}
	}
	if _, err := packedNode(nil, 0, 1, 1); err == nil || !strings.Contains(err.Error(), "job_resources") {
		t.Errorf("no allocation: %v", err)
	}
}

// A restarted scheduler finds a gang's job through the gang's pods: each member goes to its
// node of the job; and when a member is gone, the job is no longer the others' and is cancelled.
func TestRestartFindsGangJob(t *testing.T) {
	fk := slurmfake.New()
	hc := newHookClient(t, fk, false)
	b := newTestBed(t, 3, hc, fk)
	members := b.gang("g", 3)
	state, st, passed := b.cycle(b.p, members[1])
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	b.p.Reserve(context.Background(), state, members[1], passed[0])
	sub, err := fk.GetJob(context.Background(), receive(t, hc.submitted, "submission"))
	if err != nil {
		t.Fatal(err)
	}
	// Slurm runs it on n1-n3; a new scheduler knows nothing but Slurm and the pod cache.
	sub.State, sub.Nodes = []string{"RUNNING"}, "n[1-3]"
	sub.Allocation = []slurm.NodeAllocation{{Node: "n1", CPUs: 1}, {Node: "n2", CPUs: 1}, {Node: "n3", CPUs: 1}}
	fk.AddJob(*sub)
	p2 := b.newPlugin(hc, b.p.args)
	for i, m := range members {
		_, st, passed := b.cycle(p2, m)
		if want := fmt.Sprintf("k%d", i+1); !st.IsSuccess() || len(passed) != 1 || passed[0] != want {
			t.Errorf("member %d after the restart: %v, nodes %v, want %s", i, st, passed, want)
		}
	}
	if err := p2.reconcile(context.Background(), klog.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fk.Calls("CancelJobs"); got != 0 {
		t.Fatalf("the adopted gang's job was signalled %d times", got)
	}

	// A member deleted while no scheduler ran: the others have no job, and the job is cancelled.
	b.deletePod(members[0])
	p3 := b.newPlugin(hc, b.p.args)
	if j, ok := p3.jobOf(members[1]); ok {
		t.Errorf("member 1 of the changed gang has job %d", j.ID)
	}
	if err := p3.reconcile(context.Background(), klog.Background()); err != nil {
		t.Fatal(err)
	}
	if id := receive(t, hc.cancelled, "cancellation"); id != sub.ID {
		t.Fatalf("cancelled job %d, want %d", id, sub.ID)
	}
}

// A gang whose member is deleted while its job pends: the job is cancelled and the members left
// are let into the queue once, so that their condition says they wait for a complete gang (not
// for the cancelled job) without waiting for kube-scheduler's flush.
func TestGangMemberDeletedWhilePendingIsLetGo(t *testing.T) {
	fk := slurmfake.New()
	hc := newHookClient(t, fk, false)
	b := newTestBed(t, 3, hc, fk)
	members := b.gang("g", 3)
	state, st, passed := b.cycle(b.p, members[0])
	if !st.IsSuccess() {
		t.Fatal(st)
	}
	b.p.Reserve(context.Background(), state, members[0], passed[0])
	id := receive(t, hc.submitted, "submission")
	// The hook fires inside the submission; the plugin files the gang's members under the job
	// right after it returns. A pass before that reads the gang from the pods left, finds no
	// complete gang, and lets nobody in (3 runs in 300 under load failed so).
	wait.For(t, "the submission filed", 10*time.Second, time.Millisecond, func() error {
		b.p.mu.Lock()
		defer b.p.mu.Unlock()
		if _, ok := b.p.gangs[id]; !ok {
			return fmt.Errorf("job %d not filed", id)
		}
		return nil
	})
	b.poll(b.p)
	b.deletePod(members[1])
	b.h.mu.Lock()
	b.h.activated = nil
	b.h.mu.Unlock()
	if err := b.p.reconcile(context.Background(), klog.Background()); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, hc.cancelled, "cancellation"); got != id {
		t.Fatalf("cancelled job %d, want %d", got, id)
	}
	wait.For(t, "the members left let into the queue", 10*time.Second, 10*time.Millisecond, func() error {
		b.h.mu.Lock()
		defer b.h.mu.Unlock()
		got := slices.Sorted(slices.Values(b.h.activated))
		if want := []string{"ns/g-0000", "ns/g-0002"}; !slices.Equal(got, want) {
			return fmt.Errorf("activated %v, want %v", got, want)
		}
		return nil
	})
}
