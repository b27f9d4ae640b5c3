package soak

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Conn is one TCP socket of /proc/<pid>/net/tcp or tcp6.
type Conn struct {
	Local, Remote    net.IP
	LocalPort, RPort int
	Established      bool
}

// ParseProcNetTCP reads the table of /proc/<pid>/net/tcp or tcp6 (the socket table of the
// process' network namespace).
func ParseProcNetTCP(r io.Reader) ([]Conn, error) {
	var out []Conn
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		lip, lport, err := parseHexAddr(f[1])
		if err != nil {
			return nil, err
		}
		rip, rport, err := parseHexAddr(f[2])
		if err != nil {
			return nil, err
		}
		out = append(out, Conn{Local: lip, LocalPort: lport, Remote: rip, RPort: rport, Established: f[3] == "01"})
	}
	return out, sc.Err()
}

// parseHexAddr decodes "0100007F:1AA4": the address as 32-bit words in host (little-endian)
// byte order, the port big-endian.
func parseHexAddr(s string) (net.IP, int, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return nil, 0, err
	}
	b, err := hex.DecodeString(a)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, 0, fmt.Errorf("address %q", s)
	}
	ip := make(net.IP, len(b))
	for w := 0; w < len(b); w += 4 {
		ip[w], ip[w+1], ip[w+2], ip[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return ip, int(port), nil
}

// EstablishedTo counts the established connections to local port port, by remote IP, in the
// network namespace of process pid.
func EstablishedTo(procRoot string, pid, port int) (map[string]int, error) {
	out := map[string]int{}
	for _, t := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "net", t))
		if err != nil {
			return nil, err
		}
		conns, err := ParseProcNetTCP(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			if c.Established && c.LocalPort == port {
				out[c.Remote.String()]++
			}
		}
	}
	return out, nil
}

// FindProcess returns the pids of processes named comm (/proc/<pid>/comm, 15 characters at
// most) whose cgroup path contains containerID: the processes of one container on this host.
func FindProcess(procRoot, containerID, comm string) ([]int, error) {
	if len(comm) > 15 {
		comm = comm[:15]
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "stat")); err == nil && zombie(string(st)) {
			continue
		}
		cg, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), containerID) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// zombie reads the state field of /proc/<pid>/stat (after the parenthesised command).
func zombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// RSSBytes is VmRSS of /proc/<pid>/status.
func RSSBytes(procRoot string, pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
