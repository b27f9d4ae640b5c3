// Package render turns a SlurmCluster into Slurm's configuration files and the Kubernetes
// objects that run it. Every function here is pure: no I/O, no clocks, so that golden tests
// pin the output and the controller only decides what to apply.
package render

import (
	"fmt"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// Ports of the Slurm daemons.
const (
	SlurmctldPort  = 6817
	SlurmdPort     = 6818
	SlurmdbdPort   = 6819
	SlurmrestdPort = 6820
	// NodeWatchPort is sunk-nodewatch's, beside slurmctld (docs/syncer.md).
	NodeWatchPort = 6830
	MariaDBPort   = 3306
	SSHPort       = 22
)

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
	SlurmdbdConfDir = "/etc/sunk/slurmdbd"
	SSHKeysDir      = "/etc/sunk/ssh"
	SSHHostKeysDir  = "/etc/sunk/ssh-host" // the operator's host key Secret (Names.SSHHostKeySecret)
	SSSDConfDir     = "/etc/sunk/sssd"
	S6ServicesDir   = "/etc/sunk/s6"
	StateSaveDir    = "/var/spool/slurmctld"
	MariaDBDataDir  = "/var/lib/mysql"
)

// SlurmUser is the Slurm daemons' user, and the user sunk's components act as over REST.
const SlurmUser = "slurm"

// Keys of the generated Secrets.
const (
	AuthKeyName = "slurm.key"
	// AuthRingName is auth/slurm's key ring (Slurm 24.05+), which replaces slurm.key when
	// present; a rotation of the auth key keeps it in the auth Secret (AuthRing).
	AuthRingName       = "slurm.jwks"
	JWTKeyName         = wellknown.SecretJWTKey
	JWTPreviousKeyName = wellknown.SecretJWTPreviousKey
	SlurmdbdConfKey    = "slurmdbd.conf"
	// SSHHostKeyName is the login pods' sshd host key (OpenSSH's private key format), which
	// the operator makes once per cluster, so that the login pods keep one host key across
	// restarts and replicas (an admin's key in the authorized keys Secret wins).
	SSHHostKeyName = "ssh_host_ed25519_key"
	DBPasswordKey  = "password"
)

// Names are the names of every object a SlurmCluster owns, and the DNS names its
// daemons reach each other by.
type Names struct {
	Cluster       string // the SlurmCluster's name
	Namespace     string
	ClusterDomain string

	AuthSecret, JWTSecret, SlurmdbdSecret, DatabaseSecret string
	SSHHostKeySecret                                      string
	Config, Scripts, LoginServices                        string
	Controller, RestAPI, Accounting, Database, Login      string
	// NodeWatch is the node watchers' Service (spec.controller.nodeWatcher).
	NodeWatch string
	// LoginHosts is the login pods' headless Service: it makes each login pod's hostname a DNS name.
	LoginHosts string
	// ConfigCheck is the ConfigMap of the candidate configuration Slurm checks, and the prefix
	// of the check pods (ConfigCheckName).
	ConfigCheck string
	// SlurmVersion is spec.slurmVersion, the pods' LabelSlurmVersion: empty for a cluster
	// stored without the field, whose pods then carry no such label (a new label in their
	// templates would roll every pod of every such cluster at an operator upgrade).
	SlurmVersion string
}

// NamesFor derives the object names of a SlurmCluster.
func NamesFor(sc *sunkv1.SlurmCluster, clusterDomain string) Names {
	n := sc.Name
	if clusterDomain == "" {
		clusterDomain = "cluster.local"
	}
	return Names{
		Cluster: n, Namespace: sc.Namespace, ClusterDomain: clusterDomain,
		AuthSecret: n + "-auth-key", JWTSecret: n + "-jwt-key", SSHHostKeySecret: n + "-ssh-host-key",
		SlurmdbdSecret: n + "-slurmdbd", DatabaseSecret: n + "-database",
		Config: n + "-config", Scripts: n + "-scripts", LoginServices: n + "-login-services",
		Controller: n + "-controller", RestAPI: n + "-restapi", Accounting: n + "-accounting",
		Database: n + "-database", Login: n + "-login", LoginHosts: n + "-login-hosts", NodeWatch: n + "-nodewatch",
		ConfigCheck: n + "-config-check", SlurmVersion: sc.Spec.SlurmVersion,
	}
}

// ControllerPod is the pod name (and Slurm host name) of controller i (0 primary, 1 backup).
func (n Names) ControllerPod(i int) string { return fmt.Sprintf("%s-%d", n.Controller, i) }

// ControllerHost is the DNS name of controller i through the headless Service.
func (n Names) ControllerHost(i int) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", n.ControllerPod(i), n.Controller, n.Namespace, n.ClusterDomain)
}

// ControllerAddr is the address every daemon and client reaches controller i of controllers
// by: SlurmctldHost's address and --conf-server. With one controller, its pod's name in the
// headless Service. With a backup, the controller's own Service (ControllerPodServices), a
// name that resolves while its pod is gone: a client tries the controllers in order and
// resolves every one of them at each call, and Debian's Slurm retries a name that does not
// resolve ten times a second apart, so a headless name of a lost primary cost each RPC, the
// backup's own pings and every slurmrestd request 10 s. A Service without a pod refuses the
// connection at once, and the client moves on to the backup.
func (n Names) ControllerAddr(i, controllers int) string {
	if controllers == 1 {
		return n.ControllerHost(i)
	}
	return n.ServiceHost(n.ControllerPod(i))
}

// ServiceHost is the DNS name of a Service of the cluster.
func (n Names) ServiceHost(svc string) string {
	return fmt.Sprintf("%s.%s.svc.%s", svc, n.Namespace, n.ClusterDomain)
}

// AccountingPod is slurmdbd's pod name, which slurmdbd.conf's DbdHost must equal.
func (n Names) AccountingPod() string { return n.Accounting + "-0" }

// ConfServer is the --conf-server value of configless daemons (slurmd, sackd): every
// controller, primary first.
func (n Names) ConfServer(controllers int) string {
	s := ""
	for i := 0; i < controllers; i++ {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s:%d", n.ControllerAddr(i, controllers), SlurmctldPort)
	}
	return s
}

// Controllers is the number of slurmctld pods: 2 with a backup.
func Controllers(sc *sunkv1.SlurmCluster) int {
	if sc.Spec.Controller.Backup {
		return 2
	}
	return 1
}
