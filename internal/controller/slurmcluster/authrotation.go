package slurmcluster

// Rotating the auth key (docs/security.md, "Rotating keys").
//
// auth/slurm (Slurm 24.05+) reads a key ring, slurm.jwks, in its init(): slurmctld, slurmd and
// sackd at start and at every reconfigure (they re-execute themselves), slurmdbd and every
// slurmstepd only at start (src/plugins/auth/slurm/internal.c, src/slurmd/slurmstepd). A token
// carries the kid of the key that signed it and is verified with that key; a token without a
// kid (from a daemon on a plain slurm.key) with the default key. A rotation without downtime is
// therefore three rounds, each written to the auth Secret only once every daemon has loaded the
// ring of the round before: (1) add the new key, not the default; (2) make it the default;
// (3) drop the old key. Rounds 2 and 3 change what a credential signed by the previous default
// is checked against, so they also wait until no such credential can arrive: the tokens' ttl
// (AuthInfo, 60 s by default) has passed since every daemon loaded the current ring, and no job
// that started before then still runs, since its slurmstepd read the ring at its start and
// signs its messages (the batch script's completion, retried forever) with that ring's default
// key. A cluster whose Secret holds a plain slurm.key first gets a ring of that one key (round
// 0), which changes nothing for a daemon still on slurm.key: the ring's default is the same key,
// and a daemon without a ring ignores the kid.

import (
	"time"

	"sunk.dev/sunk/internal/render"
)

// authInitialKid names slurm.key once it becomes the first key of a ring.
const authInitialKid = "initial"

// authTokenLifetime is how long after every daemon loaded a ring a token signed before may
// still arrive: auth/slurm's default AuthInfo ttl (60 s, DEFAULT_TTL) and a margin.
const authTokenLifetime = 90 * time.Second

// authFacts is what the next round of an auth key rotation depends on.
type authFacts struct {
	wanted      string           // the kid the admin asked for; "" for none
	ring        *render.AuthRing // the Secret's slurm.jwks; nil when it holds a plain slurm.key
	ownSecret   bool             // the operator made the Secret (it never writes an admin's)
	loaded      bool             // every daemon has loaded the Secret's current ring
	sinceLoaded time.Duration    // since they had
	oldJobs     int              // jobs still running that started before they had (counted once the wanted key is in the ring)
	deadline    time.Duration    // AnnotationAuthKeyDeadline: how long past authTokenLifetime to wait for oldJobs; 0 for ever
}

// authStep is what to do next about the auth key.
type authStep int

const (
	authSteady      authStep = iota // nothing asked, or the wanted key is the only one
	authRefused                     // a rotation was asked of a Secret the operator does not write
	authConvert                     // round 0: slurm.key becomes a one-key ring
	authWaitLoad                    // a daemon has not loaded the current ring: deliver, reconfigure
	authAddKey                      // round 1: the wanted key joins the ring, not as default
	authMakeDefault                 // round 2: the wanted key becomes the default
	authWaitTokens                  // tokens signed under the previous ring may still be alive
	authWaitJobs                    // slurmstepds started under the previous ring still run
	authDropOld                     // round 3: the ring keeps the wanted key alone
	authRequeueOld                  // the deadline passed: requeue the jobs that started under the previous ring
)

var authStepNames = [...]string{"steady", "refused", "convert", "wait-load", "add-key", "make-default", "wait-tokens", "wait-jobs", "drop-old", "requeue-old"}

func (s authStep) String() string { return authStepNames[s] }

// nextAuthStep decides the next round. A round is written only when every daemon has loaded
// the ring of the one before; a daemon still on an older ring would refuse the tokens of a
// daemon signing with a key it does not know.
func nextAuthStep(f authFacts) authStep {
	switch {
	case f.wanted == "":
		return authSteady
	case f.ring != nil && f.ring.Default() == f.wanted && len(f.ring.Keys) == 1:
		if f.loaded {
			return authSteady
		}
		return authWaitLoad
	case !f.ownSecret:
		return authRefused
	case f.ring == nil:
		return authConvert
	case !f.loaded:
		return authWaitLoad
	case !f.ring.Has(f.wanted):
		return authAddKey
	case f.sinceLoaded < authTokenLifetime:
		return authWaitTokens
	case f.oldJobs > 0 && f.deadline > 0 && f.sinceLoaded >= f.requeueAfter():
		return authRequeueOld
	case f.oldJobs > 0:
		return authWaitJobs
	case f.ring.Default() != f.wanted:
		return authMakeDefault
	}
	return authDropOld
}

// requeueAfter is how long after every daemon loaded the ring the jobs that started before it
// are requeued, with a deadline: the tokens' lifetime, then the admin's deadline.
func (f authFacts) requeueAfter() time.Duration { return authTokenLifetime + f.deadline }
