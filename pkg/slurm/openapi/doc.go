// Package openapi holds the slurmrestd OpenAPI specs printed by Slurm 24.11 (v0.0.41, v0.0.42) and
// 26.05 (v0.0.43–v0.0.45) (`slurmrestd --generate-openapi-spec -s openapi/slurmctld -d <version>`)
// and the typed clients oapi-codegen generates from them, one package per data parser version
// (v0041 ... v0045).
//
// Nothing outside pkg/slurm imports these packages: pkg/slurm adapts them to its own
// version-independent types. Regenerate with hack/gen-slurm-openapi.sh (fetch needs the test
// bed's Slurm; generate runs offline from the checked-in specs).
package openapi

//go:generate ../../../hack/gen-slurm-openapi.sh generate
