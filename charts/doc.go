// Package charts holds sunk's Helm charts (charts/sunk, charts/slurm) and their tests: the
// copies of generated manifests the charts carry stay equal to config/, and the names, ports
// and keys the golden output repeats equal sunk's Go constants (unit tests), and `helm lint`
// and golden `helm template` output (integration tests, real helm).
package charts
