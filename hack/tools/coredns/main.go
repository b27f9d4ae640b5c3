// Command coredns is CoreDNS with only the plugins of the local cluster's Corefile
// (hack/manifests/coredns.yaml). CoreDNS's own main links every plugin, every cloud DNS
// provider's SDK with them, which made it the slowest of the tools to build on a new machine.
// A plugin the Corefile names must be imported here, or CoreDNS refuses the Corefile naming it.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics" // the prometheus directive
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
