package container

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// runEntrypoint runs the image's entrypoint (s.Entrypoint) in the container, which is this
// process's root by now (NSInit, after pivot_root), as the user with the user's groups, and
// waits for it. Its error names the flag and ends with the entrypoint's last line of output.
func runEntrypoint(s NSSpec) error {
	if len(s.Entrypoint) == 0 {
		return nil
	}
	exe := lookPathIn(s.Entrypoint[0], s.Env, func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
	})
	if exe == "" {
		return ferr("container-entrypoint", "%s: not found in the image's PATH", s.Entrypoint[0])
	}
	cmd := &exec.Cmd{Path: exe, Args: s.Entrypoint, Env: s.Env, Dir: "/"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: s.Job.UID, Gid: s.Job.GID, Groups: s.Job.GIDs}}
	if err := cmd.Run(); err != nil {
		last := strings.TrimSpace(out.String())
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if len(last) > 200 {
			last = last[:200]
		}
		return ferr("container-entrypoint", "%s: %v: %s", strings.Join(s.Entrypoint, " "), err, last)
	}
	return nil
}
