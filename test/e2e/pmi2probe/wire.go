package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The limits of Slurm's server (src/plugins/mpi/pmi2/pmi.h):
//
//	#define PMI2_MAX_KEYLEN 64
//	#define PMI2_MAX_VALLEN 1024
//
// and of the length field: client_resp_send's `snprintf(len_buf, 7, "%-6d", len)`, read back
// by handle_pmi2_cmd's `safe_read(fd, len_buf, 6)`.
const (
	maxKeyLen  = 64
	maxValLen  = 1024
	lenField   = 6
	maxBodyLen = 999999
)

// pair is one key=value of a PMI2 command or answer; order matters on the wire (Slurm's
// client_req_parse_body keeps duplicates in order), so commands are lists, not maps.
type pair struct{ key, val string }

// reply is a decoded PMI2 answer: its command ("kvs-get-response") and its pairs.
type reply struct {
	cmd   string
	pairs []pair
}

// get returns the first value of key, as the reference client's getval does.
func (r reply) get(key string) (string, bool) {
	for _, p := range r.pairs {
		if p.key == key {
			return p.val, true
		}
	}
	return "", false
}

// encodeCommand frames one PMI2 command as contribs/pmi2/pmi2_api.c's PMIi_WriteSimpleCommand
// does: the body "cmd=<cmd>;" then "key=value;" per pair, prefixed by its length in a
// 6-character field, left-justified and space-padded (it memsets the field to ' ' and copies
// the digits to its start). The reference client doubles a ';' in a value, but the server does
// not undo it (client.c: "No escape of ';' supported for now, hence no ';' in value."), so a
// ';' is refused here rather than sent to be misread.
func encodeCommand(cmd string, pairs ...pair) ([]byte, error) {
	var b strings.Builder
	b.WriteString("cmd=" + cmd + ";")
	for _, p := range pairs {
		switch {
		case p.key == "" || len(p.key) > maxKeyLen || strings.ContainsAny(p.key, "=;"):
			return nil, fmt.Errorf("%s: key %q is not one slurmstepd can parse", cmd, p.key)
		case len(p.val) > maxValLen:
			return nil, fmt.Errorf("%s: value of %s is %d bytes, over PMI2's %d", cmd, p.key, len(p.val), maxValLen)
		case strings.Contains(p.val, ";"):
			return nil, fmt.Errorf("%s: value of %s has a ';', which slurmstepd cannot parse", cmd, p.key)
		}
		b.WriteString(p.key + "=" + p.val + ";")
	}
	if b.Len() > maxBodyLen {
		return nil, fmt.Errorf("%s: %d bytes do not fit PMI2's length field", cmd, b.Len())
	}
	return []byte(fmt.Sprintf("%-*d%s", lenField, b.Len(), b.String())), nil
}

// decodeReply parses an answer's body as the reference client's PMIi_ReadCommand and
// parse_keyval do: "key=value;" pairs, each value ending at a ';' that is not doubled (";;" is
// a ';' of the value), the first pair being cmd. Unlike parse_keyval it also refuses what
// slurmstepd never sends: an empty key or a body that does not end its last value.
func decodeReply(body string) (reply, error) {
	var r reply
	rest, first := body, true
	for rest != "" {
		k, v, ok := strings.Cut(rest, "=")
		if !ok || k == "" || len(k) > maxKeyLen {
			return reply{}, fmt.Errorf("malformed answer %q: no key=value at %q", body, rest)
		}
		var val strings.Builder
		i, ended := 0, false
		for i < len(v) {
			if v[i] == ';' {
				if i+1 < len(v) && v[i+1] == ';' {
					val.WriteByte(';')
					i += 2
					continue
				}
				ended = true
				break
			}
			val.WriteByte(v[i])
			i++
		}
		if !ended {
			return reply{}, fmt.Errorf("malformed answer %q: value of %s is not ended by ';'", body, k)
		}
		if val.Len() > maxValLen {
			return reply{}, fmt.Errorf("malformed answer %q: value of %s over PMI2's %d bytes", body, k, maxValLen)
		}
		if first {
			if k != "cmd" {
				return reply{}, fmt.Errorf("malformed answer %q: it does not begin with cmd=", body)
			}
			r.cmd, first = val.String(), false
		} else {
			r.pairs = append(r.pairs, pair{k, val.String()})
		}
		rest = v[i+1:]
	}
	if r.cmd == "" {
		return reply{}, fmt.Errorf("malformed answer %q: no command", body)
	}
	return r, nil
}

// conn is a task's PMI2 connection to its slurmstepd: the socket PMI_FD names.
type conn struct {
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration // for each answer; slurmstepd answers a fence once every rank is in
}

// openFD turns the inherited descriptor into a net.Conn: its deadlines are what bound a
// fence that never ends (a blocking *os.File has none).
func openFD(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "PMI_FD")
	if f == nil {
		return nil, fmt.Errorf("PMI_FD=%d is not a descriptor", fd)
	}
	defer f.Close() // FileConn holds a duplicate
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("PMI_FD=%d is not slurmstepd's socket: %v", fd, err)
	}
	return c, nil
}

func newConn(c net.Conn, timeout time.Duration) *conn {
	return &conn{c: c, r: bufio.NewReader(c), timeout: timeout}
}

// errTimeout marks an answer that did not come in time.
var errTimeout = errors.New("no answer from slurmstepd")

// init is the PMI1-style handshake that picks PMI2: one unprefixed line, answered by one
// line. Slurm's agent.c _handle_pmi1_init reads it with a single
//
//	read(fd, buf, 64)            ... if ((n < 0) || (n >= 64)) error
//	sscanf(buf, "cmd=init pmi_version=%d pmi_subversion=%d\n", ...)
//
// and answers
//
//	"cmd=response_to_init rc=%d pmi_version=%d pmi_subversion=%d\n"
//
// so the line goes in one write, under 64 bytes, and nothing is sent before the answer.
func (c *conn) init() error {
	if err := c.write([]byte("cmd=init pmi_version=2 pmi_subversion=0\n")); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	line, err := c.readLine()
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	// The reference client parses it with PMI2U_parse_keyvals: space-separated key=value.
	kv := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		}
	}
	if kv["cmd"] != "response_to_init" {
		return fmt.Errorf("init: answered %q, not cmd=response_to_init", line)
	}
	if kv["rc"] != "0" || kv["pmi_version"] != "2" || kv["pmi_subversion"] != "0" {
		return fmt.Errorf("init: slurmstepd refused PMI 2.0: %q", line)
	}
	return nil
}

// call sends a command and reads its answer, which must be <cmd>-response with rc=0 (as
// PMIi_ReadCommandExp checks; errmsg, when there, says why not).
func (c *conn) call(cmd string, pairs ...pair) (reply, error) {
	msg, err := encodeCommand(cmd, pairs...)
	if err != nil {
		return reply{}, err
	}
	if err := c.write(msg); err != nil {
		return reply{}, fmt.Errorf("%s: %w", cmd, err)
	}
	r, err := c.readReply()
	if err != nil {
		return reply{}, fmt.Errorf("%s: %w", cmd, err)
	}
	if r.cmd != cmd+"-response" {
		return reply{}, fmt.Errorf("%s: answered %s, not %s-response", cmd, r.cmd, cmd)
	}
	rc, ok := r.get("rc")
	if !ok {
		return reply{}, fmt.Errorf("%s: answer has no rc", cmd)
	}
	if rc != "0" {
		msg, _ := r.get("errmsg")
		return reply{}, fmt.Errorf("%s: rc=%s %s", cmd, rc, msg)
	}
	return r, nil
}

func (c *conn) write(b []byte) error {
	if err := c.c.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	_, err := c.c.Write(b)
	return c.explain(err)
}

func (c *conn) readLine() (string, error) {
	if err := c.c.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", c.explain(err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// readReply reads one length-prefixed answer, as the reference client's PMIi_ReadCommand: 6
// bytes of length (atoi), then that many bytes of body.
func (c *conn) readReply() (reply, error) {
	if err := c.c.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return reply{}, err
	}
	head := make([]byte, lenField)
	if _, err := io.ReadFull(c.r, head); err != nil {
		return reply{}, c.explain(err)
	}
	n, err := strconv.Atoi(strings.TrimRight(string(head), " "))
	if err != nil || n <= 0 {
		return reply{}, fmt.Errorf("malformed length field %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return reply{}, fmt.Errorf("answer cut short after its length %d: %w", n, c.explain(err))
	}
	return decodeReply(string(body))
}

// explain names a deadline as the timeout it is and the closed socket as slurmstepd gone.
func (c *conn) explain(err error) error {
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w within %v", errTimeout, c.timeout)
	case errors.Is(err, net.ErrClosed):
		return err
	}
	return fmt.Errorf("slurmstepd's socket: %w", err)
}

func (c *conn) close() error { return c.c.Close() }
