// Command pmi2client is the smallest PMI2 client that shows an MPI step's tasks can talk to
// slurmstepd (mpi/pmi2) from inside a container: what an MPI library's PMI2 code does first.
// It speaks the wire protocol of Slurm's src/plugins/mpi/pmi2 on the descriptor PMI_FD: the
// PMI1-style "cmd=init" handshake, then length-prefixed PMI2 commands: fullinit, a kvs-put of
// its rank's host name, kvs-fence (which needs every rank of the step, across nodes), a kvs-get
// of every rank's entry, finalize. It prints one line: rank, size and every rank's host name.
// Built static (CGO_ENABLED=0) so that any image can run it.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "pmi2client: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	fd, err := strconv.Atoi(os.Getenv("PMI_FD"))
	if err != nil {
		return fmt.Errorf("PMI_FD=%q: %v", os.Getenv("PMI_FD"), err)
	}
	rank, size := os.Getenv("PMI_RANK"), os.Getenv("PMI_SIZE")
	jobid, _, _ := strings.Cut(os.Getenv("PMI_JOBID"), ".")
	c := os.NewFile(uintptr(fd), "PMI_FD")
	// The PMI1 form of init, newline-ended and unprefixed, picks the protocol version.
	if _, err := io.WriteString(c, "cmd=init pmi_version=2 pmi_subversion=0\n"); err != nil {
		return err
	}
	line, err := readLine(c)
	if err != nil {
		return fmt.Errorf("init: %v", err)
	}
	if !strings.Contains(line, "rc=0") || !strings.Contains(line, "pmi_version=2") {
		return fmt.Errorf("init answered %q", line)
	}
	resp, err := call(c, "cmd=fullinit;pmijobid="+jobid+";pmirank="+rank+";threaded=FALSE;")
	if err != nil {
		return fmt.Errorf("fullinit: %v", err)
	}
	if resp["rank"] != rank || resp["size"] != size {
		return fmt.Errorf("fullinit: rank %s size %s, the environment says %s of %s", resp["rank"], resp["size"], rank, size)
	}
	host, _ := os.Hostname()
	if _, err := call(c, "cmd=kvs-put;key=host-"+rank+";value="+host+";"); err != nil {
		return fmt.Errorf("kvs-put: %v", err)
	}
	if _, err := call(c, "cmd=kvs-fence;"); err != nil {
		return fmt.Errorf("kvs-fence: %v", err)
	}
	n, _ := strconv.Atoi(size)
	var hosts []string
	for r := 0; r < n; r++ {
		resp, err := call(c, "cmd=kvs-get;jobid="+jobid+";srcid=-1;key=host-"+strconv.Itoa(r)+";")
		if err != nil || resp["found"] != "TRUE" {
			return fmt.Errorf("kvs-get host-%d: %v %v", r, resp, err)
		}
		hosts = append(hosts, resp["value"])
	}
	if _, err := call(c, "cmd=finalize;"); err != nil {
		return fmt.Errorf("finalize: %v", err)
	}
	fmt.Printf("pmi2 rank %s of %s: hosts %s\n", rank, size, strings.Join(hosts, ","))
	return nil
}

// call sends one PMI2 command (a 6-character length, then the body) and reads the answer,
// whose rc must be 0.
func call(c *os.File, body string) (map[string]string, error) {
	if _, err := fmt.Fprintf(c, "%-6d%s", len(body), body); err != nil {
		return nil, err
	}
	hdr := make([]byte, 6)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr)))
	if err != nil {
		return nil, fmt.Errorf("length %q", hdr)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	resp := map[string]string{}
	for _, kv := range strings.Split(string(buf), ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			resp[k] = v
		}
	}
	if resp["rc"] != "0" {
		return resp, fmt.Errorf("answer %q", buf)
	}
	return resp, nil
}

// readLine reads up to a newline, a byte at a time: nothing after it is the answer's.
func readLine(c *os.File) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for len(b) < 1024 {
		if _, err := c.Read(one); err != nil {
			return string(b), err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
	return string(b), fmt.Errorf("no newline in %q", b)
}
