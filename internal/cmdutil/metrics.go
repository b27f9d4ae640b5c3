package cmdutil

import (
	"flag"

	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"sunk.dev/sunk/internal/metricsauth"
)

// MetricsFlags registers --metrics-bind-address and --metrics-secure, which the operator and
// the syncer share, and returns the metrics server options they give once the flags are parsed.
func MetricsFlags() func() metricsserver.Options {
	addr := flag.String("metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	secure := flag.Bool("metrics-secure", true, "serve /metrics over HTTPS (a self-signed certificate made at start) and only to callers whose bearer token the Kubernetes API server authenticates and allows GET /metrics; false: plain HTTP to anyone who reaches the port")
	return func() metricsserver.Options { return MetricsOptions(*addr, *secure) }
}

// MetricsOptions are the metrics server options of an address: HTTPS for the callers
// internal/metricsauth lets through, or, not secure, plain HTTP for anyone.
func MetricsOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: metricsauth.FilterProvider}
}
