package clusternames

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// LoginUserSSHPort is where sshd listens in a per-user login pod: it runs as the user, who
// may not bind port 22. The user's Service maps port 22 to it.
const LoginUserSSHPort = 2222

// maxLoginUserName bounds a per-user StatefulSet's name: its pods' controller-revision-hash
// label is the name and a 10-character hash, and a label value has at most 63 characters.
const maxLoginUserName = 52

var notLabelChars = regexp.MustCompile(`[^a-z0-9-]+`)

// LoginUserSlug is a directory user's name as a label value and a DNS label: lowercased, other
// characters than letters, digits and '-' made '-'. A name that changes on the way, or does not
// fit in max characters, gets 8 hex digits of its hash, so that two users never share a slug.
func LoginUserSlug(user string, max int) string {
	s := strings.Trim(notLabelChars.ReplaceAllString(strings.ToLower(user), "-"), "-")
	if s == user && len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(user))
	h := hex.EncodeToString(sum[:4])
	if len(s) > max-9 {
		s = strings.TrimRight(s[:max-9], "-")
	}
	if s == "" {
		return h
	}
	return s + "-" + h
}

// LoginUser is the name of the StatefulSet, Service and Secret of a user's pod in a PerUser
// login pool: <cluster>-login-<pool>-<user slug>.
func (n Names) LoginUser(pool, user string) string {
	prefix := n.Login + "-" + pool + "-"
	return prefix + LoginUserSlug(user, max(maxLoginUserName-len(prefix), 9))
}

// LoginGroup is the name of a Group login pool's StatefulSet and Service: <cluster>-login-<pool>.
func (n Names) LoginGroup(pool string) string { return n.Login + "-" + pool }

// LoginUserPod is the pod (and host) name of a user's login pod.
func (n Names) LoginUserPod(pool, user string) string { return n.LoginUser(pool, user) + "-0" }
