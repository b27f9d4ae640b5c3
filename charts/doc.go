// Package charts holds sunk's Helm charts (charts/sunk, charts/slurm) and their tests: the
// copies of generated manifests the charts carry stay equal to config/ (a unit test), and
// `helm lint` and golden `helm template` output (integration tests, real helm).
package charts
