package nodewatch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Feed applies sunk-slurm-nodes' output from r to s until r ends. A line sunk does not read
// makes the table unreadable (and ends the feed): a reader that half understands its input must
// not serve it.
func Feed(s *Store, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		l, err := parseLine(sc.Bytes())
		if err != nil {
			s.Fail(err)
			return err
		}
		s.Apply(l, time.Now())
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	err = fmt.Errorf("reading sunk-slurm-nodes: %w", err)
	s.Fail(err)
	return err
}

// Run runs command (sunk-slurm-nodes and its arguments) and feeds s from it, again after it
// exits (slurmctld restarts do not stop it, but a crash or a killed process must not end the
// watch), until ctx ends. Its stderr goes to ours.
func Run(ctx context.Context, s *Store, command []string, restartAfter time.Duration) error {
	if len(command) == 0 {
		return errors.New("nodewatch: no command to read the node table with")
	}
	for {
		cmd := exec.CommandContext(ctx, command[0], command[1:]...)
		cmd.Stderr = os.Stderr
		// Its own process group, killed whole: a wrapper (a test bed's chroot) must not leave
		// the reader behind.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err == nil {
			err = Feed(s, out)
			// Feed ends on a bad line too: the process must go with it.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if werr := cmd.Wait(); werr != nil && !strings.Contains(err.Error(), "sunk-slurm-nodes printed") {
				err = fmt.Errorf("%s: %w", command[0], werr)
			}
		}
		s.Fail(fmt.Errorf("%s stopped: %w", command[0], err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(restartAfter):
		}
	}
}
