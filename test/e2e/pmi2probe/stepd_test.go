package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fakeStepd answers a step's tasks as slurmstepd's mpi/pmi2 agent does (src/plugins/mpi/pmi2:
// agent.c, pmi2.c, client.c, kvs.c), for every rank of the step at once: one socketpair per
// task, as setup.c makes them (socketpair(AF_UNIX, SOCK_STREAM, 0, &task_socks[i * 2])).
// It keeps each task's requests as they came, byte for byte.
type fakeStepd struct {
	size      int
	holdFence bool // never answer a fence: a rank that never comes, a tree that is cut

	mu       sync.Mutex
	temp     map[string]string // kvs-put before the fence (kvs.c temp_kvs_add)
	kvs      map[string]string // what kvs-get reads: the fence's result
	fenced   []net.Conn
	requests map[int][]string
}

func newFakeStepd(size int) *fakeStepd {
	return &fakeStepd{size: size, temp: map[string]string{}, kvs: map[string]string{}, requests: map[int][]string{}}
}

// socketPair returns the task's end as the probe opens it (openFD on a descriptor) and the
// server's end.
func socketPair(t *testing.T) (task, server net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	task, err = openFD(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "stepd")
	defer f.Close()
	server, err = net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { task.Close(); server.Close() })
	return task, server
}

func (s *fakeStepd) record(rank int, req string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[rank] = append(s.requests[rank], req)
}

// serve is one task's connection: first the PMI1 init, then PMI2 commands until finalize.
func (s *fakeStepd) serve(c net.Conn, rank int) error {
	// agent.c _handle_pmi1_init:
	//	while ( (n = read(fd, buf, 64)) < 0 && errno == EINTR);
	//	if ((n < 0) || (n >= 64)) { error("mpi/pmi2: failed to read PMI1 init command"); ...
	//	n = sscanf(buf, "cmd=init pmi_version=%d pmi_subversion=%d\n", &version, &subversion);
	//	snprintf(buf, 64, "cmd=response_to_init rc=%d pmi_version=%d pmi_subversion=%d\n", ...
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || n >= 64 {
		return fmt.Errorf("failed to read PMI1 init command (%d bytes, %v)", n, err)
	}
	s.record(rank, string(buf[:n]))
	var version, subversion int
	rc := 0
	if k, _ := fmt.Sscanf(string(buf[:n]), "cmd=init pmi_version=%d pmi_subversion=%d\n", &version, &subversion); k != 2 {
		rc, version, subversion = 1, 2, 0
	} else if version != 2 || subversion != 0 { // set_pmi_version: 1.1 or 2.0; this fake speaks 2.0
		rc = -1
	}
	if _, err := fmt.Fprintf(c, "cmd=response_to_init rc=%d pmi_version=%d pmi_subversion=%d\n", rc, version, subversion); err != nil {
		return err
	}
	for {
		// pmi2.c handle_pmi2_cmd:
		//	safe_read(fd, len_buf, 6);
		//	len_buf[6] = '\0';
		//	len = atoi(len_buf);
		//	buf = xmalloc(len + 1);
		//	safe_read(fd, buf, len);
		head := make([]byte, 6)
		if _, err := io.ReadFull(c, head); err != nil {
			return fmt.Errorf("reading a command's length: %v", err)
		}
		body := make([]byte, cAtoi(string(head)))
		if _, err := io.ReadFull(c, body); err != nil {
			return fmt.Errorf("reading a command: %v", err)
		}
		s.record(rank, string(head)+string(body))
		if len(body) == 0 {
			// "this call will send back "cmd=finalize" back that will trigger the desired
			// error handling paths, and then tears down the connection"
			s.respond(c, "cmd=finalize-response;rc=0;")
			return c.Close()
		}
		cmd, pairs, err := parseRequest(string(body))
		if err != nil {
			return err
		}
		switch cmd {
		case "fullinit":
			// _handle_fullinit: client_req_get_int(req, PMIJOBID_KEY, ...), PMIRANK_KEY and
			// client_req_get_bool(req, THREADED_KEY, ...), each refused when missing with
			// PMI2_ERR_INVALID_ARG; then
			//	CMD_KEY"="FULLINITRESP_CMD";" RC_KEY"=%d;" PMIVERSION_KEY"=%d;" PMISUBVER_KEY"=%d;"
			//	RANK_KEY"=%d;" SIZE_KEY"=%d;" APPNUM_KEY"=-1;" DEBUGGED_KEY"="FALSE_VAL";"
			//	PMIVERBOSE_KEY"=%s;"
			rc := 0
			for _, k := range []string{"pmijobid", "pmirank", "threaded"} {
				if _, ok := pairs[k]; !ok {
					rc = 3
				}
			}
			s.respond(c, fmt.Sprintf("cmd=fullinit-response;rc=%d;pmi-version=2;pmi-subversion=0;rank=%d;size=%d;appnum=-1;debugged=FALSE;pmiverbose=FALSE;", rc, rank, s.size))
		case "kvs-put":
			// _handle_kvs_put: temp_kvs_add(key, val), then CMD_KEY"="KVSPUTRESP_CMD";" RC_KEY"=%d;"
			s.mu.Lock()
			s.temp[pairs["key"]] = pairs["value"]
			s.mu.Unlock()
			s.respond(c, "cmd=kvs-put-response;rc=0;")
		case "kvs-fence":
			// _handle_kvs_fence answers nothing itself: once every task (and every child
			// stepd of the tree) is in, the puts go up the tree to srun, and the answer,
			// send_kvs_fence_resp_to_clients' CMD_KEY"="KVSFENCERESP_CMD";" RC_KEY"=%d;",
			// goes to every task when the whole step's KVS comes back.
			s.mu.Lock()
			s.fenced = append(s.fenced, c)
			if len(s.fenced) == s.size && !s.holdFence {
				for k, v := range s.temp {
					s.kvs[k] = v
				}
				for _, w := range s.fenced {
					s.respond(w, "cmd=kvs-fence-response;rc=0;")
				}
				s.fenced = nil
			}
			s.mu.Unlock()
		case "kvs-get":
			// _handle_kvs_get: val = kvs_get(key); found:
			//	CMD_KEY"="KVSGETRESP_CMD";" RC_KEY"=0;" FOUND_KEY"="TRUE_VAL";" VALUE_KEY"=%s;"
			// else CMD_KEY"="KVSGETRESP_CMD";" RC_KEY"=0;" FOUND_KEY"="FALSE_VAL";"
			s.mu.Lock()
			v, ok := s.kvs[pairs["key"]]
			s.mu.Unlock()
			if ok {
				s.respond(c, "cmd=kvs-get-response;rc=0;found=TRUE;value="+v+";")
			} else {
				s.respond(c, "cmd=kvs-get-response;rc=0;found=FALSE;")
			}
		case "finalize":
			// _handle_finalize: CMD_KEY"="FINALIZERESP_CMD";" RC_KEY"=%d;", then
			// shutdown(fd, SHUT_RDWR); close(fd);
			s.respond(c, "cmd=finalize-response;rc=0;")
			return c.Close()
		default:
			return fmt.Errorf("invalid pmi2 command received: '%s'", cmd)
		}
	}
}

// respond is client.c client_resp_send for PMI 2.0:
//
//	snprintf(len_buf, 7, "%-6d", len) ... safe_write(fd, len_buf, 6); safe_write(fd, resp->buf, len);
func (s *fakeStepd) respond(c net.Conn, body string) {
	fmt.Fprintf(c, "%-6d", len(body))
	io.WriteString(c, body)
}

// parseRequest is client.c _parse_cmd and client_req_parse_body for PMI 2.0 (sep and term
// ';'): the body must begin "cmd=", the command ends at ';', then key=value pairs, each key
// ending at '=' and each value at ';', with no unescaping ("No escape of ';' supported for
// now, hence no ';' in value.").
func parseRequest(body string) (string, map[string]string, error) {
	rest, ok := strings.CutPrefix(body, "cmd=")
	if !ok {
		return "", nil, fmt.Errorf("request not begin with 'cmd=': %s", body)
	}
	cmd, rest, ok := strings.Cut(rest, ";")
	if !ok {
		return "", nil, fmt.Errorf("cmd not properly terminated in client request: %s", body)
	}
	pairs := map[string]string{}
	for rest != "" {
		k, r, ok := strings.Cut(rest, "=")
		if !ok {
			return "", nil, fmt.Errorf("no value for key %s in req", rest)
		}
		v, r, ok := strings.Cut(r, ";")
		if !ok {
			return "", nil, fmt.Errorf("value not properly terminated in client request: %s", body)
		}
		if _, dup := pairs[k]; !dup {
			pairs[k] = v // _client_req_get_val returns the first
		}
		rest = r
	}
	return cmd, pairs, nil
}

// cAtoi is C's atoi: leading blanks, a sign, then digits up to the first non-digit.
func cAtoi(s string) int {
	s = strings.TrimLeft(s, " \t\n")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	if neg {
		return -n
	}
	return n
}
