//go:build soak

// Restarts the soak did not cause: the containers of every component it kills, and of the
// login pod, are watched at each sample; one that restarted outside that component's own kill
// window is a finding, reported with why its container ended and the end of its log, read at
// once (a second restart would replace the log kubelet keeps).

package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// loginC is the demo's login pod, watched for restarts only.
var loginC = component{name: "login", ns: slurmNS, selector: "sunk.dev/cluster=demo,sunk.dev/component=login"}

// restart is a container's restart the soak saw.
type restart struct {
	comp, pod, container string
	seen                 time.Time
	ended                *corev1.ContainerStateTerminated // nil when kubelet no longer says
	planned              bool                             // inside the component's kill window
	logFile              string                           // the ended container's log's end
	logEnd               string                           // its last line
	warnings             []string                         // the pod's Warning events
}

// restartCounts are the restart counts of the watched containers, by pod/container.
func (s *soak) restartCounts() map[string]int32 {
	out := map[string]int32{}
	for _, c := range append(append([]component{}, killOrder...), loginC) {
		pods, err := s.pods(c)
		if err != nil {
			continue
		}
		for _, p := range pods {
			for _, st := range p.Status.ContainerStatuses {
				out[c.name+"|"+p.Name+"|"+st.Name] = st.RestartCount
			}
		}
	}
	return out
}

// checkRestarts compares the watched containers' restart counts with the last ones seen and
// records each new restart; s.restartBase holds the counts the run began with.
func (s *soak) checkRestarts(now time.Time) {
	for key, n := range s.restartCounts() {
		s.mu.Lock()
		was, known := s.restartBase[key]
		s.restartBase[key] = n
		s.mu.Unlock()
		if n <= was || (!known && n == 0) {
			continue
		}
		comp, rest, _ := strings.Cut(key, "|")
		pod, ctr, _ := strings.Cut(rest, "|")
		s.recordRestart(comp, pod, ctr, now)
	}
}

func (s *soak) recordRestart(comp, podName, ctr string, now time.Time) {
	ns := slurmNS
	for _, c := range sunkComps {
		if c.name == comp {
			ns = sunkNS
		}
	}
	r := restart{comp: comp, pod: podName, container: ctr, seen: now}
	if p, err := s.cs.CoreV1().Pods(ns).Get(s.ctx, podName, metav1.GetOptions{}); err == nil {
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == ctr {
				r.ended = st.LastTerminationState.Terminated
			}
		}
	}
	at := now
	if r.ended != nil && !r.ended.FinishedAt.IsZero() {
		at = r.ended.FinishedAt.Time
	}
	s.mu.Lock()
	for _, w := range s.windows {
		end := w.end
		if end.IsZero() {
			end = now
		}
		if w.what == "kill "+comp && !at.Before(w.start.Add(-time.Second)) && !at.After(end) {
			r.planned = true
		}
	}
	s.mu.Unlock()
	if !r.planned {
		s.readEnded(ns, &r)
		s.logf("%s: container %s of pod %s restarted outside the soak's kills (%s); its log's end: %s",
			comp, ctr, podName, r.why(), r.logEnd)
	}
	s.mu.Lock()
	s.restarts = append(s.restarts, r)
	s.mu.Unlock()
}

// readEnded saves the end of the ended container's log and the pod's Warning events
// (Unhealthy, Killing, OOM) for the report.
func (s *soak) readEnded(ns string, r *restart) {
	b, err := s.cs.CoreV1().Pods(ns).GetLogs(r.pod, &corev1.PodLogOptions{Container: r.container, Previous: true, TailLines: ptr.To[int64](80)}).DoRaw(s.ctx)
	if err == nil {
		r.logFile = fmt.Sprintf("restart-%s-%s-%s-%d.log", r.comp, r.pod, r.container, r.seen.Unix())
		_ = os.WriteFile(filepath.Join(s.dir, r.logFile), b, 0o644)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		r.logEnd = "`" + strings.ReplaceAll(oneLine(lines[len(lines)-1]), "`", "'") + "`"
	} else {
		r.logEnd = fmt.Sprintf("(unread: %v)", err)
	}
	evs, err := s.cs.CoreV1().Events(ns).List(s.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", r.pod).String()})
	if err != nil {
		return
	}
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning {
			r.warnings = append(r.warnings, fmt.Sprintf("%s ×%d: %s", e.Reason, max(e.Count, 1), oneLine(e.Message)))
		}
	}
}

// why says how the container ended, as kubelet recorded it.
func (r restart) why() string {
	if r.ended == nil {
		return "kubelet keeps no end state"
	}
	w := fmt.Sprintf("%s, exit %d, at %s", r.ended.Reason, r.ended.ExitCode, r.ended.FinishedAt.UTC().Format(time.TimeOnly))
	if len(r.warnings) > 0 {
		w += "; the pod's warnings: " + strings.Join(r.warnings, "; ")
	}
	return w
}

// reportRestarts adds the bound and a note per unplanned restart.
func (s *soak) reportRestarts(r *Report) {
	var bad []restart
	for _, x := range s.restarts {
		if !x.planned {
			bad = append(bad, x)
		}
	}
	r.Checks = append(r.Checks, Check{Bound: "no component restarted but by the soak's kills", Value: Num(float64(len(bad))), OK: len(bad) == 0, Judged: true})
	for _, x := range bad {
		r.Notes = append(r.Notes, fmt.Sprintf("%s restarted outside the soak's kills at %.0fs: container %s of pod %s (%s); the end of its log (%s): %s",
			x.comp, x.seen.Sub(s.start).Seconds(), x.container, x.pod, x.why(), x.logFile, x.logEnd))
	}
}
