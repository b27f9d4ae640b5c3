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

// watched is one container of a watched component's pod.
type watched struct {
	comp           component
	pod, container string
}

// watchedContainers are the statuses of the watched components' containers.
func (s *soak) watchedContainers() map[watched]corev1.ContainerStatus {
	out := map[watched]corev1.ContainerStatus{}
	for _, c := range append(append([]component{}, killOrder...), loginC) {
		pods, err := s.pods(c)
		if err != nil {
			continue
		}
		for _, p := range pods {
			for _, st := range p.Status.ContainerStatuses {
				out[watched{c, p.Name, st.Name}] = st
			}
		}
	}
	return out
}

// restartCounts are the watched containers' restart counts.
func (s *soak) restartCounts() map[watched]int32 {
	out := map[watched]int32{}
	for w, st := range s.watchedContainers() {
		out[w] = st.RestartCount
	}
	return out
}

// checkRestarts compares the watched containers' restart counts with the last ones seen and
// records each new restart; s.restartBase holds the counts the run began with.
func (s *soak) checkRestarts(now time.Time) {
	for w, st := range s.watchedContainers() {
		s.mu.Lock()
		was, known := s.restartBase[w]
		s.restartBase[w] = st.RestartCount
		s.mu.Unlock()
		if st.RestartCount <= was || (!known && st.RestartCount == 0) {
			continue
		}
		s.recordRestart(w, st.LastTerminationState.Terminated, now)
	}
}

// recordRestart records a restart of the watched container seen now, planned when it ended
// inside its own component's kill window (a second earlier at most: kubelet's end time has a
// resolution of a second).
func (s *soak) recordRestart(w watched, ended *corev1.ContainerStateTerminated, now time.Time) {
	r := restart{comp: w.comp.name, pod: w.pod, container: w.container, seen: now, ended: ended}
	at := now
	if ended != nil && !ended.FinishedAt.IsZero() {
		at = ended.FinishedAt.Time
	}
	s.mu.Lock()
	for _, k := range s.windows {
		if k.what == "kill "+w.comp.name && (window{start: k.start.Add(-time.Second), end: k.end}).covers(at) {
			r.planned = true
		}
	}
	s.mu.Unlock()
	if !r.planned {
		s.readEnded(w.comp.ns, &r)
		s.logf("%s: container %s of pod %s restarted outside the soak's kills (%s); its log's end: %s",
			r.comp, r.container, r.pod, r.why(), r.logEnd)
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
