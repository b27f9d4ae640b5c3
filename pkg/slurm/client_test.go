package slurm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const nodesJSON = `{"nodes":[{"name":"n1","state":["IDLE","DRAIN"],"reason":"k8s: cordoned","cpus":4,
 "real_memory":1024,"weight":3,"features":["a","b"],"boot_time":{"set":true,"infinite":false,"number":1700000000}}],
 "last_update":{"set":true,"infinite":false,"number":1700000100},"errors":[],"warnings":[]}`

// server answers every request with the handler of the test and records what it saw.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func reply(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func jsonReply(status int, body string) http.HandlerFunc {
	return reply(status, "application/json", body)
}

func newTestClient(t *testing.T, url, version string, m *Metrics) Client {
	t.Helper()
	c, err := New(Config{URL: url, APIVersion: version, Tokens: StaticToken{User: "root", Value: "tok"},
		Timeout: 2 * time.Second, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func errJSON(code int, desc string) string {
	return fmt.Sprintf(`{"errors":[{"description":%q,"error_number":%d,"error":"e","source":"src"}],"warnings":[]}`, desc, code)
}

func TestErrorPaths(t *testing.T) {
	type op func(ctx context.Context, c Client) (any, error)
	listNodes := func(ctx context.Context, c Client) (any, error) { return c.ListNodes(ctx, time.Time{}) }
	getNode := func(ctx context.Context, c Client) (any, error) { return c.GetNode(ctx, "n9") }
	updateNode := func(ctx context.Context, c Client) (any, error) {
		return nil, c.UpdateNode(ctx, "n9", NodeUpdate{State: NodeStateDrain, Reason: ptr("x")})
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		op      op
		want    error // sentinel, or nil for "a *SlurmError without kind"
		code    int
	}{
		{"200 with errors", jsonReply(200, strings.Replace(nodesJSON, `"errors":[]`, `"errors":[{"description":"boom","error_number":2001,"error":"e","source":"s"}]`, 1)), listNodes, nil, 2001},
		{"401 text", reply(401, "text/plain", "Authentication failure"), listNodes, ErrUnauthorized, 0},
		{"403", jsonReply(403, errJSON(2002, "denied")), listNodes, ErrUnauthorized, 2002},
		{"511 bad token", jsonReply(511, errJSON(1007, "Failure to query nodes")), listNodes, ErrUnauthorized, 1007},
		{"200 auth errno", jsonReply(200, errJSON(1007, "Failure to query nodes")), listNodes, ErrUnauthorized, 1007},
		{"404", jsonReply(404, errJSON(0, "nope")), getNode, ErrNotFound, 0},
		{"unknown node 200 errno 0", jsonReply(200, errJSON(0, "Failure to query node n9")), getNode, ErrNotFound, 0},
		{"unknown node 200 no errors no nodes", jsonReply(200, `{"nodes":[],"errors":[]}`), getNode, ErrNotFound, 0},
		{"get returns another node", jsonReply(200, nodesJSON), getNode, ErrNotFound, 0},
		{"update unknown node 500 2018", jsonReply(500, errJSON(2018, "Failure to update node n9")), updateNode, ErrNotFound, 2018},
		{"500 no body", reply(500, "", ""), listNodes, ErrUnavailable, 0},
		{"503 html", reply(503, "text/html", "<html>down</html>"), listNodes, ErrUnavailable, 0},
		{"500 ctld unreachable", jsonReply(500, errJSON(1800, "Unable to contact slurmctld")), listNodes, ErrUnavailable, 1800},
		{"500 slurm refusal", jsonReply(500, errJSON(2072, "bad gres")), updateNode, nil, 2072},
		{"malformed JSON", jsonReply(200, `{"nodes":[{"name":"n1",`), listNodes, ErrDecode, 0},
		{"truncated JSON", jsonReply(200, nodesJSON[:len(nodesJSON)/2]), listNodes, ErrDecode, 0},
		{"wrong type", jsonReply(200, `{"nodes":"all of them","errors":[]}`), listNodes, ErrDecode, 0},
		{"200 not JSON", reply(200, "text/plain", "ok"), listNodes, ErrDecode, 0},
		{"errno 0 on a list is not NotFound", jsonReply(200, errJSON(0, "Failure to query nodes")), listNodes, nil, 0},
	}
	for _, v := range []string{V0041, V0042} {
		for _, tc := range cases {
			t.Run(v+"/"+tc.name, func(t *testing.T) {
				s := newServer(t, tc.handler)
				got, err := tc.op(context.Background(), newTestClient(t, s.URL, v, nil))
				if err == nil {
					t.Fatalf("want an error, got success: %+v", got)
				}
				if !isNil(got) {
					t.Fatalf("an error must come with no result, got %+v", got)
				}
				for _, s := range []error{ErrNotFound, ErrUnauthorized, ErrUnavailable, ErrDecode} {
					if errors.Is(err, s) != (s == tc.want) {
						t.Fatalf("errors.Is(%v, %v) = %v", err, s, !(s == tc.want))
					}
				}
				var se *SlurmError
				if tc.code != 0 && (!errors.As(err, &se) || se.Code != tc.code || se.Source == "") {
					t.Fatalf("want a *SlurmError with code %d, got %#v", tc.code, err)
				}
			})
		}
	}
}

func isNil(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case *NodeList:
		return x == nil
	case *Node:
		return x == nil
	}
	return false
}

func TestTransportErrors(t *testing.T) {
	for _, v := range []string{V0041, V0042} {
		t.Run(v+"/connection refused", func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			_, err = newTestClient(t, "http://"+addr, v, nil).ListNodes(context.Background(), time.Time{})
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("want ErrUnavailable, got %v", err)
			}
		})
		t.Run(v+"/client timeout", func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			})
			c, err := New(Config{URL: s.URL, APIVersion: v, Tokens: StaticToken{User: "u", Value: "t"}, Timeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ListNodes(context.Background(), time.Time{}); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("want ErrUnavailable, got %v", err)
			}
		})
		t.Run(v+"/context deadline", func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := newTestClient(t, s.URL, v, nil).GetNode(ctx, "n1")
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want ErrUnavailable and DeadlineExceeded, got %v", err)
			}
		})
	}
}

func TestListNodesDecodesAndSendsCredentials(t *testing.T) {
	for _, v := range []string{V0041, V0042} {
		t.Run(v, func(t *testing.T) {
			s := newServer(t, jsonReply(200, nodesJSON))
			l, err := newTestClient(t, s.URL, v, nil).ListNodes(context.Background(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			n := l.Nodes[0]
			if len(l.Nodes) != 1 || n.Name != "n1" || !n.Drained() || n.BaseState() != "IDLE" || n.Reason != "k8s: cordoned" ||
				n.CPUs != 4 || n.RealMemoryMB != 1024 || n.Weight != 3 || len(n.Features) != 2 ||
				!n.BootTime.Equal(time.Unix(1700000000, 0)) || !l.LastUpdate.Equal(time.Unix(1700000100, 0)) {
				t.Fatalf("decoded %+v", l)
			}
			r := s.requests()[0]
			if r.URL.Path != "/slurm/"+v+"/nodes/" || r.Header.Get("X-SLURM-USER-NAME") != "root" || r.Header.Get("X-SLURM-USER-TOKEN") != "tok" {
				t.Fatalf("request %s %v", r.URL, r.Header)
			}
			if got := r.URL.Query()["flags"]; strings.Join(got, ",") != "ALL,DETAIL,MIXED,FUTURE" {
				t.Fatalf("flags %v", got)
			}
		})
	}
}

func TestIncrementalList(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := map[string]string{V0041: "2026-01-02T03:04:05", V0042: fmt.Sprint(since.Unix())}
	for _, v := range []string{V0041, V0042} {
		t.Run(v+"/not modified", func(t *testing.T) {
			s := newServer(t, reply(304, "", ""))
			l, err := newTestClient(t, s.URL, v, nil).ListNodes(context.Background(), since)
			if err != nil || !l.NotModified || len(l.Nodes) != 0 || !l.LastUpdate.Equal(since) {
				t.Fatalf("got %+v, %v", l, err)
			}
			if got := s.requests()[0].URL.Query().Get("update_time"); got != want[v] {
				t.Fatalf("update_time %q, want %q", got, want[v])
			}
		})
		t.Run(v+"/304 where not asked is an error", func(t *testing.T) {
			s := newServer(t, reply(304, "", ""))
			if _, err := newTestClient(t, s.URL, v, nil).GetNode(context.Background(), "n1"); err == nil {
				t.Fatal("want an error")
			}
		})
		t.Run(v+"/partitions no-change bug falls back to a full list", func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("update_time") != "" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(500)
					_, _ = w.Write([]byte(`{"errors":[{"description":"Unable to query partitions","error_number":-1,"error":"Unspecified error","source":"_dump_nodes"}]}`))
					return
				}
				jsonReply(200, nodesJSON)(w, r)
			})
			l, err := newTestClient(t, s.URL, v, nil).ListNodes(context.Background(), since)
			if err != nil || l.NotModified || len(l.Nodes) != 1 || len(s.requests()) != 2 {
				t.Fatalf("got %+v, %v after %d requests", l, err, len(s.requests()))
			}
		})
	}
}

func TestJobsAndSubmit(t *testing.T) {
	jobJSON := `{"jobs":[{"job_id":7,"name":"j","job_state":["COMPLETED"],"nodes":"n1","exit_code":{"status":["SUCCESS"],
	 "return_code":{"set":true,"infinite":false,"number":0}},"time_limit":{"set":true,"infinite":false,"number":5},
	 "priority":{"set":true,"infinite":false,"number":10},"memory_per_node":{"set":true,"infinite":false,"number":256},
	 "job_resources":{"cpus":3,"select_type":["CPU"],"threads_per_core":{"set":false,"infinite":false,"number":0},
	  "nodes":{"count":2,"list":"n[1-2]","whole":false,"allocation":[
	   {"index":0,"name":"n1","cpus":{"count":2,"used":0},"memory":{"used":0,"allocated":200},"sockets":[]},
	   {"index":1,"name":"n2","cpus":{"count":1,"used":0},"memory":{"used":0,"allocated":100},"sockets":[]}]}}}],
	 "last_update":{"set":true,"infinite":false,"number":1700000100},"errors":[]}`
	for _, v := range []string{V0041, V0042, V0045} {
		t.Run(v, func(t *testing.T) {
			var body string
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					b := make([]byte, 1<<16)
					n, _ := r.Body.Read(b)
					body = string(b[:n])
					jsonReply(200, `{"job_id":7,"errors":[]}`)(w, r)
					return
				}
				jsonReply(200, jobJSON)(w, r)
			})
			c := newTestClient(t, s.URL, v, nil)
			res, err := c.SubmitJob(context.Background(), JobSubmit{Script: "#!/bin/sh\n", GRES: "gpu:2", TimeLimit: 90 * time.Second,
				Exclusive: true, RequiredNodes: []string{"n1"}, MemoryPerNodeMB: 256, MemoryPerCPUMB: 100, Priority: ptr(uint32(5))})
			if err != nil || res.JobID != 7 {
				t.Fatalf("submit %+v, %v", res, err)
			}
			for _, want := range []string{`"tres_per_node":"gres/gpu:2"`, `"time_limit":{"number":2,"set":true}`, `"required_nodes":["n1"]`,
				`"memory_per_node":{"number":256,"set":true}`, `"memory_per_cpu":{"number":100,"set":true}`, `"environment":["PATH=`, `"current_working_directory":"/tmp"`} {
				if !strings.Contains(body, want) {
					t.Errorf("submit body lacks %s: %s", want, body)
				}
			}
			j, err := c.GetJob(context.Background(), 7)
			if err != nil || j.BaseState() != "COMPLETED" || j.ExitCode != 0 || j.TimeLimit != 5*time.Minute || j.Priority != 10 || j.MemoryPerNodeMB != 256 {
				t.Fatalf("job %+v, %v", j, err)
			}
			// The CPUs per node, as slurmctld's job_resources has them: how a packed gang's
			// members are spread (sunk-scheduler).
			if want := []NodeAllocation{{"n1", 2, 200}, {"n2", 1, 100}}; !slices.Equal(j.Allocation, want) {
				t.Fatalf("allocation %+v, want %+v", j.Allocation, want)
			}
			if _, err := c.GetJob(context.Background(), 8); !errors.Is(err, ErrNotFound) {
				t.Fatalf("other id: %v", err)
			}
		})
	}
	t.Run("submit answer without id", func(t *testing.T) {
		s := newServer(t, jsonReply(200, `{"errors":[]}`))
		if _, err := newTestClient(t, s.URL, V0041, nil).SubmitJob(context.Background(), JobSubmit{Script: "#!/bin/sh\n"}); !errors.Is(err, ErrDecode) {
			t.Fatalf("want ErrDecode, got %v", err)
		}
	})
}

func TestUnsupportedReservationWrites(t *testing.T) {
	c := newTestClient(t, "http://127.0.0.1:1", V0041, nil)
	if err := c.CreateReservation(context.Background(), ReservationCreate{Name: "m"}); !errors.Is(err, ErrUnsupported) {
		t.Fatal(err)
	}
	if err := c.DeleteReservation(context.Background(), "m"); !errors.Is(err, ErrUnsupported) {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/node/") {
			jsonReply(200, errJSON(0, "Failure to query node x"))(w, r)
			return
		}
		jsonReply(200, nodesJSON)(w, r)
	})
	c, err := New(Config{URL: s.URL, Tokens: StaticToken{User: "root", Value: "tok"}, Metrics: m, Cluster: "ns/a"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.ListNodes(context.Background(), time.Time{})
	_, _ = c.ListNodes(context.Background(), time.Time{})
	_, _ = c.GetNode(context.Background(), "x")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := series(mfs)
	for k, want := range map[string]float64{
		"sunk_slurm_rest_requests_total cluster=ns/a endpoint=GET /nodes/ outcome=ok ":                            2,
		"sunk_slurm_rest_requests_total cluster=ns/a endpoint=GET /node/{node_name} outcome=not_found ":           1,
		"sunk_slurm_rest_request_duration_seconds cluster=ns/a endpoint=GET /nodes/ outcome=ok ":                  2,
		"sunk_slurm_rest_request_duration_seconds cluster=ns/a endpoint=GET /node/{node_name} outcome=not_found ": 1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (have %v)", k, got[k], want, got)
		}
	}
	m.Forget("ns/a")
	if mfs, err = reg.Gather(); err != nil || len(series(mfs)) != 0 {
		t.Fatalf("after Forget: %v, %v", series(mfs), err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice must fail")
	}
}

// series flattens gathered metrics to "name label=value ... " -> count or value.
func series(mfs []*dto.MetricFamily) map[string]float64 {
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			labels := ""
			for _, l := range mm.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			if mm.Counter != nil {
				got[mf.GetName()+" "+labels] = mm.Counter.GetValue()
			}
			if mm.Histogram != nil {
				got[mf.GetName()+" "+labels] = float64(mm.Histogram.GetSampleCount())
			}
		}
	}
	return got
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{{}, {URL: "http://x"}, {URL: "http://x", Tokens: StaticToken{"u", "t"}, APIVersion: "v0.0.39"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func isUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }
