// Package faultproxy stands between a component under test and the real slurmrestd and, while
// a fault is set, breaks the conversation the way a broken slurmrestd (or what sits in front of
// it) does. Standard library only, so that both Go modules' tests use it.
package faultproxy

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Faults a Proxy knows.
const (
	// None passes every request through.
	None = ""
	// HTTP500 answers every request with slurmrestd's "cannot reach slurmctld" error.
	HTTP500 = "http-500"
	// GarbageJSON answers a truncated JSON body with status 200.
	GarbageJSON = "garbage-json"
	// Hang answers nothing until the fault ends (or the client gives up).
	Hang = "hang"
	// LoseAnswer passes the request through to slurmrestd, which acts on it, and answers the
	// client 502 instead of slurmrestd's answer: a submission that happened but whose job id
	// never arrived.
	LoseAnswer = "lose-answer"
)

// Proxy is an HTTP server in front of slurmrestd; URL is where clients reach it.
type Proxy struct {
	*httptest.Server
	mu    sync.Mutex
	fault string
	heal  chan struct{} // closed when the fault ends: releases hung requests
	// Broken counts the requests answered by a fault.
	Broken atomic.Int64
}

// New starts a Proxy to target (slurmrestd's URL), closed when the test ends.
func New(t testing.TB, target string) *Proxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &Proxy{heal: make(chan struct{})}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		fault, heal := p.fault, p.heal
		p.mu.Unlock()
		if fault != None {
			p.Broken.Add(1)
		}
		switch fault {
		case None:
			rp.ServeHTTP(w, r)
		case HTTP500:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"errors":[{"description":"Unable to query nodes","error_number":1001,"error":"Unable to contact slurm controller (connect failure)","source":"_dump_nodes"}],"warnings":[]}`))
		case GarbageJSON:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"nodes":[{"name":"x","state":["IDLE"`))
		case Hang:
			select {
			case <-r.Context().Done():
			case <-heal:
				w.WriteHeader(http.StatusGatewayTimeout)
			}
		case LoseAnswer:
			rp.ServeHTTP(discard{header: http.Header{}}, r)
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// Set makes every following request meet fault (None heals).
func (p *Proxy) Set(fault string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fault != None && fault == None {
		close(p.heal)
		p.heal = make(chan struct{})
	}
	p.fault = fault
}

// discard is a ResponseWriter that drops slurmrestd's answer.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
