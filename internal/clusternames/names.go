// Package clusternames is the one home of what the objects a SlurmCluster owns are called and where
// its daemons listen: the object names (Names), the DNS names and ports its daemons reach
// each other by, and the rules by which a compute pod's slurmd registers with Slurm
// (register.go). internal/render writes objects under these names; the REST client pool
// (internal/slurmconn) and the syncer find those objects and recognise those nodes by them
// without importing the renderer. The sunk chart repeats some of them (the scheduler's URLs,
// its Role on the JWT key Secret), which charts/names_test.go checks against this package.
package clusternames

import (
	"fmt"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Ports of the Slurm daemons and of the services beside them.
const (
	SlurmctldPort  = 6817
	SlurmdPort     = 6818
	SlurmdbdPort   = 6819
	SlurmrestdPort = 6820
	// SlurmrestdLocalPort is slurmrestd's own, on 127.0.0.1 of its pod, when its TLS
	// terminator serves SlurmrestdPort (spec.tls): nothing outside the pod reaches it.
	SlurmrestdLocalPort = 6821
	// NodeWatchPort is sunk-nodewatch's, beside slurmctld (docs/syncer.md).
	NodeWatchPort = 6830
	MariaDBPort   = 3306
	SSHPort       = 22
)

// Names are the names of every object a SlurmCluster owns, and the DNS names its daemons
// reach each other by.
type Names struct {
	Cluster       string // the SlurmCluster's name
	Namespace     string
	ClusterDomain string

	AuthSecret, JWTSecret, SlurmdbdSecret, DatabaseSecret string
	SSHHostKeySecret                                      string
	// TLSSecret holds the cluster's CA and the serving certificate of slurmrestd's terminator
	// and the node watchers (pkg/clustertls names its keys), with spec.tls.
	TLSSecret                                        string
	Config, Scripts, LoginServices                   string
	Controller, RestAPI, Accounting, Database, Login string
	// NodeWatch is the node watchers' Service (spec.controller.nodeWatcher).
	NodeWatch string
	// LoginHosts is the login pods' headless Service: it makes each login pod's hostname a DNS name.
	LoginHosts string
	// LoginUserHosts and LoginGroupHosts are the same for the pods of PerUser and Group login
	// pools (spec.login.pools).
	LoginUserHosts, LoginGroupHosts string
	// ConfigCheck is the ConfigMap of the candidate configuration Slurm checks, and the prefix
	// of the check pods (ConfigCheckName).
	ConfigCheck string
	// The NetworkPolicies (render.NetworkPolicies): IngressPods admits the cluster's pods to
	// each other, IngressDatabase slurmdbd to MariaDB, IngressSunk sunk's components to
	// slurmrestd and the node watcher, IngressSSH anyone to the login pods' sshd.
	// IngressLoginPools anyone to the sshd of login pools' pods (spec.login.pools).
	IngressPods, IngressDatabase, IngressSunk, IngressSSH, IngressLoginPools string
	// SlurmVersion is spec.slurmVersion, the pods' LabelSlurmVersion: empty for a cluster
	// stored without the field, whose pods then carry no such label (a new label in their
	// templates would roll every pod of every such cluster at an operator upgrade).
	SlurmVersion string
	// TLS is spec.tls: sunk's clients speak https to slurmrestd and the node watchers, and
	// verify them against the CA of TLSSecret.
	TLS bool
}

// For derives the object names of a SlurmCluster; an empty clusterDomain is cluster.local.
func For(sc *sunkv1.SlurmCluster, clusterDomain string) Names {
	n := sc.Name
	if clusterDomain == "" {
		clusterDomain = "cluster.local"
	}
	return Names{
		Cluster: n, Namespace: sc.Namespace, ClusterDomain: clusterDomain,
		AuthSecret: n + "-auth-key", JWTSecret: n + "-jwt-key", SSHHostKeySecret: n + "-ssh-host-key",
		TLSSecret: n + "-tls", TLS: sc.Spec.TLS.On(),
		SlurmdbdSecret: n + "-slurmdbd", DatabaseSecret: n + "-database",
		Config: n + "-config", Scripts: n + "-scripts", LoginServices: n + "-login-services",
		Controller: n + "-controller", RestAPI: n + "-restapi", Accounting: n + "-accounting",
		Database: n + "-database", Login: n + "-login", LoginHosts: n + "-login-hosts", LoginUserHosts: n + "-login-user-hosts", LoginGroupHosts: n + "-login-group-hosts", NodeWatch: n + "-nodewatch",
		ConfigCheck: n + "-config-check", SlurmVersion: sc.Spec.SlurmVersion,
		IngressPods: n + "-ingress-pods", IngressDatabase: n + "-ingress-database",
		IngressSunk: n + "-ingress-sunk", IngressSSH: n + "-ingress-ssh", IngressLoginPools: n + "-ingress-login-pools",
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
// headless Service. With a backup, the controller's own Service (render's
// ControllerPodServices), a name that resolves while its pod is gone: a client tries the
// controllers in order and resolves every one of them at each call, and Debian's Slurm
// retries a name that does not resolve ten times a second apart, so a headless name of a lost
// primary cost each RPC, the backup's own pings and every slurmrestd request 10 s. A Service
// without a pod refuses the connection at once, and the client moves on to the backup.
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

// ServerName is the name sunk's clients verify a Service of the cluster's certificate by:
// <svc>.<namespace>.svc, which needs no cluster domain, so that a client outside the cluster
// (dialling the cluster IP) and one inside it check the same name.
func (n Names) ServerName(svc string) string { return svc + "." + n.Namespace + ".svc" }

// ServiceNames are the DNS names a client may reach a Service of the cluster by.
func (n Names) ServiceNames(svc string) []string {
	return []string{svc, svc + "." + n.Namespace, n.ServerName(svc), n.ServiceHost(svc)}
}

// TLSNames are the names the serving certificate carries: every name of slurmrestd's and the
// node watchers' Services (the watchers' whether or not the cluster runs them, so that turning
// them on needs no new certificate).
func (n Names) TLSNames() []string {
	return append(n.ServiceNames(n.RestAPI), n.ServiceNames(n.NodeWatch)...)
}

// Scheme is how sunk's clients speak to slurmrestd and the node watchers.
func (n Names) Scheme() string {
	if n.TLS {
		return "https"
	}
	return "http"
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

// ConfigCheckName is the check pod of a configuration.
func (n Names) ConfigCheckName(hash string) string { return n.ConfigCheck + "-" + hash }
