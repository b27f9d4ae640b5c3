// Package render turns a SlurmCluster into Slurm's configuration files and the Kubernetes
// objects that run it. Every function here is pure: no I/O, no clocks, so that golden tests
// pin the output and the controller only decides what to apply.
package render

import sunkv1 "sunk.dev/sunk/api/v1alpha1"

// SlurmUID and SlurmGID are Debian's fixed ids of the slurm user (the images keep them).
const (
	SlurmUID = 64030
	SlurmGID = 64030
)

// Paths inside the Slurm containers: the contract with images/slurm (docs/images.md).
const (
	ConfigDir       = "/etc/slurm"
	ScriptsDir      = "/etc/slurm-scripts"
	KeysMountDir    = "/etc/sunk/keys"
	KeysRuntimeDir  = "/run/slurm-keys"
	SlurmRunDir     = "/run/slurm"          // sackd's socket and configless cache
	SlurmctldRunDir = "/run/slurmctld"      // slurmctld's auth socket (sack.socket)
	NodeWatchJWTDir = "/etc/sunk/nodewatch" // the JWT keys the node watcher checks tokens with
	TLSDir          = "/etc/sunk/tls"       // the serving certificate of slurmrestd's terminator and the node watcher (spec.tls)
	SlurmdbdConfDir = "/etc/sunk/slurmdbd"
	SSHKeysDir      = "/etc/sunk/ssh"
	SSHHostKeysDir  = "/etc/sunk/ssh-host" // the operator's host key Secret (clusternames.Names.SSHHostKeySecret)
	SSSDConfDir     = "/etc/sunk/sssd"
	S6ServicesDir   = "/etc/sunk/s6"
	StateSaveDir    = "/var/spool/slurmctld"
	MariaDBDataDir  = "/var/lib/mysql"
)

// Keys of the generated Secrets (the JWT key Secret's are wellknown.SecretJWTKey and
// wellknown.SecretJWTPreviousKey, which sunk-scheduler reads too).
const (
	AuthKeyName = "slurm.key"
	// AuthRingName is auth/slurm's key ring (Slurm 24.05+), which replaces slurm.key when
	// present; a rotation of the auth key keeps it in the auth Secret (AuthRing).
	AuthRingName    = "slurm.jwks"
	SlurmdbdConfKey = "slurmdbd.conf"
	// SSHHostKeyName is the login pods' sshd host key (OpenSSH's private key format), which
	// the operator makes once per cluster, so that the login pods keep one host key across
	// restarts and replicas (an admin's key in the authorized keys Secret wins).
	SSHHostKeyName = "ssh_host_ed25519_key"
	DBPasswordKey  = "password"
)

// Controllers is the number of slurmctld pods: 2 with a backup.
func Controllers(sc *sunkv1.SlurmCluster) int {
	if sc.Spec.Controller.Backup {
		return 2
	}
	return 1
}
