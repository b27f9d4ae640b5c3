// Trust: which Slurm jobs are this scheduler's placeholders.

package plugin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/slurm"
)

// A placeholder job is trusted (may bind, evict and be cancelled) only when both hold:
//
//   - its owner is the user the scheduler submits as. Slurm sets a job's user from the
//     credentials it was submitted with, so no user can make a job owned by another: this is
//     what a job with a copied comment (squeue -o %k shows every comment) cannot pass.
//   - its comment carries the mark, an HMAC-SHA256 of the comment's body under a key only the
//     scheduler holds (markKeyFile, a Secret of the sunk chart kept across upgrades). The owner
//     alone is not enough: that account is shared (every sunk component's JWT names SlurmUser,
//     and Slurm admins use it), and any of its users could make a job naming a pod that has no
//     job yet (pod UIDs are no secret), which the scheduler would adopt and bind the pod to.
//     Making a mark for a pod needs the key.
//
// The mark is readable once written, so it proves nothing alone; with the owner check, copying
// a whole comment is left to holders of the SlurmUser identity, who can cancel that job
// outright anyway. Jobs of a scheduler without marks (before this check) are ignored too: see
// docs/scheduler.md, Tenancy, for the upgrade.
//
// A comment is <body>;mark=v1.<mac>, body as commentKeys reads it.
const (
	markSep     = ";mark="
	markVersion = "v1."
	// markContext keeps the MAC apart from any other use of the key.
	markContext = "sunk-scheduler placeholder job comment\x00"
	// minMarkKey is the shortest key accepted: 32 bytes, as many as the MAC's.
	minMarkKey = 32
)

// Why a job with a placeholder comment is not trusted; the label of jobsUntrusted.
const (
	untrustedOwner = "owner" // another Slurm user's job
	untrustedMark  = "mark"  // the scheduler's user, but no valid mark
)

// marker makes and checks the marks of job comments.
type marker struct{ key []byte }

func loadMarker(file string) (marker, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return marker{}, fmt.Errorf("job mark key: %w", err)
	}
	key := []byte(strings.TrimSpace(string(raw)))
	if len(key) < minMarkKey {
		return marker{}, fmt.Errorf("job mark key %s: %d bytes, want at least %d", file, len(key), minMarkKey)
	}
	return marker{key: key}, nil
}

func (m marker) mac(body string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte(markContext + body))
	return markVersion + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// comment is the marked comment of the job filed under key.
func (m marker) comment(key string) string {
	body := jobComment(key)
	return body + markSep + m.mac(body)
}

// verify returns a comment's body when its mark is valid.
func (m marker) verify(comment string) (string, bool) {
	body, mark, ok := strings.Cut(comment, markSep)
	if !ok || len(m.key) == 0 {
		return "", false
	}
	return body, hmac.Equal([]byte(mark), []byte(m.mac(body)))
}

// judge returns the job-book keys of a trusted placeholder job; for any other job nil, and
// why it is not trusted when its comment looks like a placeholder's ("" when it does not).
func (m marker) judge(j *slurm.Job, user string) (keys []string, untrusted string) {
	body, marked := m.verify(j.Comment)
	if !marked {
		body, _, _ = strings.Cut(j.Comment, markSep)
	}
	keys = commentKeys(body)
	switch {
	case keys == nil:
		return nil, ""
	case j.UserName != user:
		return nil, untrustedOwner
	case !marked:
		return nil, untrustedMark
	}
	return keys, ""
}

// untrustedJobs remembers the jobs reported as untrusted, so that each is logged and counted
// once however often the lists show it.
type untrustedJobs struct {
	mu   sync.Mutex
	seen map[uint32]time.Time
}

// report logs and counts a job the first time it is found untrusted.
func (u *untrustedJobs) report(j *slurm.Job, why string) {
	u.mu.Lock()
	_, done := u.seen[j.ID]
	if !done {
		u.seen[j.ID] = time.Now()
	}
	u.mu.Unlock()
	if done {
		return
	}
	jobsUntrusted.WithLabelValues(why).Inc()
	klog.Background().WithName(Name).Info("ignoring a Slurm job with a placeholder comment that is not this scheduler's",
		"job", j.ID, "user", j.UserName, "why", why, "comment", j.Comment)
}

// forget drops reports older than an hour of jobs the list no longer shows (a job that drops
// out of one list and is back in the next is not reported again).
func (u *untrustedJobs) forget(listed func(uint32) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, at := range u.seen {
		if time.Since(at) > time.Hour && !listed(id) {
			delete(u.seen, id)
		}
	}
}

// MarkedComment is a placeholder comment (sunk-pod:<uid>, sunk-gang:<key>) with its mark under
// the key in markKeyFile: what a job submitted by hand must carry for the scheduler to take it
// as its own.
func MarkedComment(markKeyFile, comment string) (string, error) {
	m, err := loadMarker(markKeyFile)
	if err != nil {
		return "", err
	}
	return comment + markSep + m.mac(comment), nil
}

// placeholderKeys returns the job-book keys of one of this scheduler's placeholder jobs, nil
// for any other job (reported once when it claims to be one).
func (p *Plugin) placeholderKeys(j *slurm.Job) []string {
	keys, why := p.verdicts.judge(p.mark, j, p.args.SlurmUser)
	if why != "" {
		p.untrusted.report(j, why)
	}
	return keys
}

// verdicts remembers marker.judge's verdict per job, with the owner and comment it was made
// on: every lifecycle pass judges every job, and an HMAC per job and pass was a tenth of the
// plugin's CPU in BenchmarkThousandPods. The zero value is ready; it forgets all at
// maxVerdicts.
type verdicts struct {
	mu sync.Mutex
	m  map[uint32]verdict
}

type verdict struct {
	user, comment string
	keys          []string
	why           string
}

const maxVerdicts = 20000

func (v *verdicts) judge(m marker, j *slurm.Job, user string) ([]string, string) {
	v.mu.Lock()
	got, ok := v.m[j.ID]
	v.mu.Unlock()
	if ok && got.user == j.UserName && got.comment == j.Comment {
		return got.keys, got.why
	}
	keys, why := m.judge(j, user)
	keys = slices.Clip(keys) // callers that append get a copy
	v.mu.Lock()
	if v.m == nil || len(v.m) >= maxVerdicts {
		v.m = map[uint32]verdict{}
	}
	v.m[j.ID] = verdict{user: j.UserName, comment: j.Comment, keys: keys, why: why}
	v.mu.Unlock()
	return keys, why
}
