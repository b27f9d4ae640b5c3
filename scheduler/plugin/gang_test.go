package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
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

func (h *hookClient) CancelJob(ctx context.Context, id uint32) error {
	err := h.Fake.CancelJob(ctx, id)
	h.cancelled <- id
	return err
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
func submitGang(t *testing.T, n int) []byte {
	fk := slurmfake.New()
	w := newHookClient(t, fk, true)
	b := newTestBed(t, 3, w, fk)
	members := b.gang("g", n)
	state, st, passed := b.cycle(b.p, members[0])
	if !st.IsSuccess() || len(passed) != 3 {
		t.Fatalf("gang of %d: PreFilter %v, nodes %v", n, st, passed)
	}
	if st := b.p.Reserve(context.Background(), state, members[0], passed[0]); st.Code() != framework.Unschedulable {
		t.Fatalf("gang of %d: Reserve %v, want a submission", n, st)
	}
	return receive(t, w.bodies, fmt.Sprintf("submission for the gang of %d", n))
}

// Nothing in a gang's Slurm request grows with the gang: the request for 5,000 members is as
// long as the one for 10 but for the digits of the count itself (tasks, minimum and maximum
// nodes). The first comment format listed every member (37 bytes each) and Slurm refused
// gangs of more than 27 (comment over 1,024 bytes).
func TestGangRequestSizeDoesNotGrow(t *testing.T) {
	small, large := submitGang(t, 10), submitGang(t, 5000)
	t.Logf("submission: %d bytes for 10 members, %d bytes for 5,000", len(small), len(large))
	counts := func(body []byte, n int) []byte {
		var req struct {
			Job map[string]any `json:"job"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"tasks", "minimum_nodes", "maximum_nodes"} {
			if got := req.Job[k]; got != float64(n) {
				t.Fatalf("gang of %d: %s = %v", n, k, got)
			}
			req.Job[k] = 0
		}
		if c, _ := req.Job["comment"].(string); !strings.HasPrefix(c, gangPrefix) || len(c) > 128 { // key and mark: 91 bytes
			t.Fatalf("gang of %d: comment %q", n, c)
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if d := len(large) - len(small); d != 3*(len("5000")-len("10")) {
		t.Errorf("request for 10 members: %d bytes, for 5,000: %d bytes (%+d, want only the count's digits)", len(small), len(large), d)
	}
	if s, l := counts(small, 10), counts(large, 5000); len(s) != len(l) {
		t.Errorf("with the counts equal: %d bytes for 10 members, %d for 5,000\n%s\n%s", len(s), len(l), s, l)
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
	if got := fk.Calls("SignalJob"); got != 0 {
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
