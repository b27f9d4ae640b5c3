package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEncodeCommandIsTheReferenceClientsFrame(t *testing.T) {
	for _, tc := range []struct {
		cmd   string
		pairs []pair
		want  string
	}{
		{"fullinit", []pair{{"pmijobid", "12.0"}, {"pmirank", "1"}, {"threaded", "FALSE"}},
			"52    cmd=fullinit;pmijobid=12.0;pmirank=1;threaded=FALSE;"},
		{"kvs-fence", nil, "14    cmd=kvs-fence;"},
		{"kvs-get", []pair{{"jobid", "7.0"}, {"srcid", "-1"}, {"key", "host-2"}},
			"42    cmd=kvs-get;jobid=7.0;srcid=-1;key=host-2;"},
		// A value may hold '=': the server's value ends at ';' only.
		{"kvs-put", []pair{{"key", "k"}, {"value", "a=b"}}, "28    cmd=kvs-put;key=k;value=a=b;"},
	} {
		got, err := encodeCommand(tc.cmd, tc.pairs...)
		if err != nil || string(got) != tc.want {
			t.Errorf("encodeCommand(%s, %v) = %q, %v; want %q", tc.cmd, tc.pairs, got, err, tc.want)
		}
		// What slurmstepd reads back: atoi of 6 bytes, then the body as client.c parses it.
		cmd, _, err := parseRequest(string(got[6:]))
		if cAtoi(string(got[:6])) != len(got)-6 || cmd != tc.cmd || err != nil {
			t.Errorf("slurmstepd would read %q as %d bytes of %q (%v)", got, cAtoi(string(got[:6])), cmd, err)
		}
	}
	for _, bad := range []pair{{"key", "a;b"}, {"", "v"}, {"k=1", "v"}, {strings.Repeat("k", 65), "v"}, {"key", strings.Repeat("v", 1025)}} {
		if got, err := encodeCommand("kvs-put", bad); err == nil {
			t.Errorf("encodeCommand(kvs-put, %q=%q) = %q, want an error: slurmstepd cannot parse it", bad.key, bad.val, got)
		}
	}
}

func TestDecodeReplyReadsSlurmsAnswers(t *testing.T) {
	for _, tc := range []struct {
		body string
		want reply
	}{
		{"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=2;size=3;appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
			reply{"fullinit-response", []pair{{"rc", "0"}, {"pmi-version", "2"}, {"pmi-subversion", "0"}, {"rank", "2"}, {"size", "3"}, {"appnum", "-1"}, {"debugged", "FALSE"}, {"pmiverbose", "FALSE"}}}},
		{"cmd=kvs-fence-response;rc=0;", reply{"kvs-fence-response", []pair{{"rc", "0"}}}},
		{"cmd=kvs-get-response;rc=0;found=FALSE;", reply{"kvs-get-response", []pair{{"rc", "0"}, {"found", "FALSE"}}}},
		// parse_keyval: ";;" is a ';' of the value.
		{"cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b=c;", reply{"kvs-get-response", []pair{{"rc", "0"}, {"found", "TRUE"}, {"value", "a;b=c"}}}},
		{"cmd=kvs-fence-response;rc=14;errmsg=mpi/pmi2: failed to send temp kvs;",
			reply{"kvs-fence-response", []pair{{"rc", "14"}, {"errmsg", "mpi/pmi2: failed to send temp kvs"}}}},
	} {
		got, err := decodeReply(tc.body)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("decodeReply(%q) = %+v, %v; want %+v", tc.body, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "rc=0;cmd=x;", "cmd=x", "cmd=x;rc=0", "cmd=x;rc", "=x;", "cmd=x;=0;"} {
		if got, err := decodeReply(bad); err == nil {
			t.Errorf("decodeReply(%q) = %+v, want an error", bad, got)
		}
	}
}

// TestProbeWiresUpAStepThroughSlurmsServer runs three ranks against a fake slurmstepd that
// speaks as Slurm's does: each prints every rank's host, and each sent exactly the reference
// client's bytes.
func TestProbeWiresUpAStepThroughSlurmsServer(t *testing.T) {
	s := newFakeStepd(3)
	hosts := []string{"node-a", "node-b", "node-c"}
	lines := make([]string, 3)
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for rank := range 3 {
		task, server := socketPair(t)
		wg.Add(2)
		go func() { defer wg.Done(); errs[3+rank] = s.serve(server, rank) }()
		go func() {
			defer wg.Done()
			lines[rank], errs[rank] = probe(newConn(task, 5*time.Second), taskOf(rank, 3, "41.0", hosts[rank]))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for rank, line := range lines {
		want := fmt.Sprintf("pmi2probe: rank=%d size=3 host=%s hosts=node-a,node-b,node-c", rank, hosts[rank])
		if line != want {
			t.Errorf("rank %d printed %q, want %q", rank, line, want)
		}
	}
	want := []string{
		"cmd=init pmi_version=2 pmi_subversion=0\n",
		"52    cmd=fullinit;pmijobid=41.0;pmirank=1;threaded=FALSE;",
		"36    cmd=kvs-put;key=host-1;value=node-b;",
		"14    cmd=kvs-fence;",
		"43    cmd=kvs-get;jobid=41.0;srcid=-1;key=host-0;",
		"43    cmd=kvs-get;jobid=41.0;srcid=-1;key=host-1;",
		"43    cmd=kvs-get;jobid=41.0;srcid=-1;key=host-2;",
		"13    cmd=finalize;",
	}
	if got := s.requests[1]; !reflect.DeepEqual(got, want) {
		t.Errorf("rank 1 sent\n%q\nwant\n%q", got, want)
	}
}

func TestFenceThatNeverEndsTimesOut(t *testing.T) {
	s := newFakeStepd(1)
	s.holdFence = true
	task, server := socketPair(t)
	go s.serve(server, 0)
	start := time.Now()
	_, err := probe(newConn(task, 300*time.Millisecond), taskOf(0, 1, "5.0", "h"))
	if !errors.Is(err, errTimeout) || !strings.HasPrefix(err.Error(), "kvs-fence: no answer from slurmstepd within 300ms: not every rank") {
		t.Fatalf("probe with a fence that never ends: %v, want kvs-fence's timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the timeout took %v", d)
	}
}

// TestProtocolErrorsSayWhat: each wrong answer of a server stops the probe with its cause.
func TestProtocolErrorsSayWhat(t *testing.T) {
	initOK := "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n"
	frame := func(body string) string { return fmt.Sprintf("%-6d%s", len(body), body) }
	fullinitOK := frame("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=0;size=1;appnum=-1;debugged=FALSE;pmiverbose=FALSE;")
	for _, tc := range []struct {
		name    string
		answers []string
		want    string
	}{
		{"init refused", []string{"cmd=response_to_init rc=-1 pmi_version=1 pmi_subversion=1\n"}, "init: slurmstepd refused PMI 2.0"},
		{"not an init answer", []string{"cmd=barrier_out rc=0\n"}, `init: answered "cmd=barrier_out rc=0", not cmd=response_to_init`},
		{"init answer cut", []string{"cmd=response_to_init rc=0"}, "init: slurmstepd's socket: EOF"},
		{"fullinit refused", []string{initOK, frame("cmd=fullinit-response;rc=3;pmi-version=2;pmi-subversion=0;rank=0;size=1;")}, "fullinit: rc=3"},
		{"another rank", []string{initOK, frame("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;")}, `fullinit: rank="1", want "0"`},
		{"wrong answer", []string{initOK, frame("cmd=kvs-put-response;rc=0;")}, "fullinit: answered kvs-put-response, not fullinit-response"},
		{"no rc", []string{initOK, frame("cmd=fullinit-response;rank=0;")}, "fullinit: answer has no rc"},
		{"bad length", []string{initOK, "abc   cmd=x;"}, `fullinit: malformed length field "abc   "`},
		{"cut answer", []string{initOK, "40    cmd=fullinit-response;"}, "fullinit: answer cut short after its length 40"},
		{"malformed", []string{initOK, frame("cmd=fullinit-response;rc=0")}, "fullinit: malformed answer"},
		{"fence failed", []string{initOK, fullinitOK, frame("cmd=kvs-put-response;rc=0;"),
			frame("cmd=kvs-fence-response;rc=-1;errmsg=mpi/pmi2: failed to send temp kvs;")}, "kvs-fence: rc=-1 mpi/pmi2: failed to send temp kvs"},
		{"key not found", []string{initOK, fullinitOK, frame("cmd=kvs-put-response;rc=0;"), frame("cmd=kvs-fence-response;rc=0;"),
			frame("cmd=kvs-get-response;rc=0;found=FALSE;")}, "kvs-get host-0 after the fence: found=FALSE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, server := socketPair(t)
			go scripted(server, tc.answers)
			_, err := probe(newConn(task, 2*time.Second), taskOf(0, 1, "5.0", "h"))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("probe: %v, want %q...", err, tc.want)
			}
		})
	}
}

// scripted reads each request (the init line, then framed commands) and writes the next
// canned answer; after the last it closes the socket.
func scripted(c net.Conn, answers []string) {
	defer c.Close()
	for i, a := range answers {
		if i == 0 {
			c.Read(make([]byte, 64))
		} else {
			head := make([]byte, 6)
			if _, err := io.ReadFull(c, head); err != nil {
				return
			}
			io.ReadFull(c, make([]byte, cAtoi(string(head))))
		}
		io.WriteString(c, a)
	}
}

func TestTaskFromEnvNeedsSrunsVariables(t *testing.T) {
	t.Setenv("PMI_FD", "5")
	t.Setenv("PMI_RANK", "2")
	t.Setenv("PMI_SIZE", "3")
	t.Setenv("PMI_JOBID", "9.0")
	got, err := taskFromEnv()
	if err != nil || got.fd != 5 || got.rank != 2 || got.size != 3 || got.jobid != "9.0" || got.host == "" {
		t.Fatalf("taskFromEnv() = %+v, %v", got, err)
	}
	t.Setenv("PMI_RANK", "3")
	if _, err := taskFromEnv(); err == nil {
		t.Error("rank 3 of 3 accepted")
	}
	t.Setenv("PMI_RANK", "x")
	if _, err := taskFromEnv(); err == nil || !strings.Contains(err.Error(), `PMI_RANK="x"`) {
		t.Errorf("PMI_RANK=x: %v", err)
	}
	t.Setenv("PMI_RANK", "0")
	t.Setenv("PMI_JOBID", "")
	if _, err := taskFromEnv(); err == nil || !strings.Contains(err.Error(), "srun --mpi=pmi2") {
		t.Errorf("no PMI_JOBID: %v", err)
	}
}

func taskOf(rank, size int, jobid, host string) task {
	return task{rank: rank, size: size, jobid: jobid, host: host}
}
