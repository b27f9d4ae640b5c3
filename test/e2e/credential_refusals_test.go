//go:build e2e

package e2e

import "testing"

// The lines are auth/slurm's and slurm_unpack_received_msg's (Slurm 26.05 internal.c,
// slurm_protocol_api.c), as slurmctld logs them.
func TestCredentialRefusals(t *testing.T) {
	const (
		expired = `[2026-11-28T05:32:22.258] error: decode_jwt: token expired at 1795843881
[2026-11-28T05:32:22.258] error: verify_internal: decode_jwt() failed
[2026-11-28T05:32:22.259] error: slurm_unpack_received_msg: [ctld-0:45480] auth_g_verify: REQUEST_PING has authentication error: Unspecified error
[2026-11-28T05:32:22.260] error: slurm_unpack_received_msg: [ctld-0:45480] Protocol authentication error`
		unknownKid = `[2026-11-28T05:38:43.500] error: decode_jwt: could not find kid=initial
[2026-11-28T05:38:43.500] error: verify_internal: decode_jwt() failed
[2026-11-28T05:38:43.501] error: slurm_unpack_received_msg: [login-0:41524] auth_g_verify: REQUEST_JOB_INFO has authentication error: Unspecified error
[2026-11-28T05:38:43.502] error: slurm_unpack_received_msg: [login-0:41524] Protocol authentication error`
		badSignature = `[2026-11-28T05:38:43.600] error: decode_jwt: jwt_decode (with key kid=k2) failure: Invalid argument
[2026-11-28T05:38:43.600] error: verify_internal: decode_jwt() failed
[2026-11-28T05:38:43.601] error: slurm_unpack_received_msg: [login-0:41530] auth_g_verify: REQUEST_JOB_INFO has authentication error: Unspecified error
[2026-11-28T05:38:43.601] error: slurm_unpack_received_msg: [login-0:41530] Protocol authentication error`
		noCause = `[2026-11-28T05:38:43.700] error: slurm_unpack_received_msg: [login-0:41532] Protocol authentication error`
		quiet   = `[2026-11-28T05:38:43.350] Recovered state of 0 reservations
[2026-11-28T05:38:43.352] Running as primary controller`
	)
	for _, c := range []struct {
		name            string
		log             string
		forKey, expired int
	}{
		{"nothing refused", quiet, 0, 0},
		{"an expired credential", quiet + "\n" + expired + "\n" + quiet, 0, 1},
		{"an unknown kid", unknownKid, 1, 0},
		{"a signature that does not verify", badSignature, 1, 0},
		{"a refusal without a cause in the log counts against the key", quiet + "\n" + noCause, 1, 0},
		{"each refusal is judged by its own cause", expired + "\n" + noCause, 1, 1},
		{"another peer's expired credential is not this one's cause", expired[:len(expired)-len("[ctld-0:45480] Protocol authentication error")] + "[login-0:1] Protocol authentication error", 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			forKey, expired := credentialRefusals(c.log)
			if len(forKey) != c.forKey || len(expired) != c.expired {
				t.Errorf("for the key %d %q, expired %d %q; want %d and %d", len(forKey), forKey, len(expired), expired, c.forKey, c.expired)
			}
		})
	}
}
