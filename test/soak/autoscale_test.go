//go:build soak

// The demo's autoscaled NodeSet (burst): how often it changed size while the soak ran.

package soak

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// burstFigures counts the autoscaler's decisions on the NodeSet burst during the run from its
// events (a series counts each time it happened): the issue's "scale decisions per hour under a
// steady mixed load". Jobs it killed would be in the job table's judgement like any other.
func (s *soak) burstFigures() {
	evs, err := s.cs.EventsV1().Events(slurmNS).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Errorf("events of NodeSet burst: %v", err)
		return
	}
	var up, down float64
	for _, ev := range evs.Items {
		if ev.Regarding.Kind != "NodeSet" || ev.Regarding.Name != "burst" || ev.CreationTimestamp.Time.Before(s.start) {
			continue // the demo's install: the nodes registering
		}
		n := 1.0
		if ev.Series != nil {
			n = float64(ev.Series.Count)
		}
		switch ev.Reason {
		case sunkv1.ReasonScaledUp:
			up += n
		case sunkv1.ReasonScaledDown:
			down += n
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	hours := time.Since(s.start).Hours()
	s.figures["burst_up"], s.figures["burst_down"] = up, down
	s.figures["burst_decisions_per_hour"] = (up + down) / hours
}
