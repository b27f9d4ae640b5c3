// Package soak is sunk's soak test (issue 14): the demo's cluster from the charts (real kubelet,
// real Slurm) left running under churn and faults for DURATION, sampled every 10 s, and judged
// by the bounds of docs/soak.md. The test itself (soak_test.go) has the build tag `soak`; this
// package's plain files are the pure parts it uses (Prometheus text, /proc/net/tcp, histogram
// quantiles, the report), unit-tested without the tag. Run it with `make soak DURATION=30m`.
package soak
