package wellknown

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The GRES type of a GPU is a name two components must agree on: the operator registers a
// compute node's GPUs under it (from its node's product label), and sunk-scheduler asks for it
// when a pod pins that product. Spelt differently, Slurm finds no node for the job.

// gpuTypeRe is a GRES type sunk renders: a letter first (Slurm reads "gpu:8:2" as a count),
// then lower-case letters, digits, '_', '.' and '-' (never ':' or ',', which separate GRES).
var gpuTypeRe = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,62}$`)

// gpuAliases are the short names used when a product names one of these GPUs as a whole
// word: "NVIDIA-H100-80GB-HBM3" is h100, "NVIDIA-GH200-480GB" is not h200.
var gpuAliases = []string{"h100", "h200", "b200", "a100", "l40s"}

// GPUTypeFromProduct is the GRES type of a GPU Feature Discovery product label: the short
// alias when one matches a word of it, else the name as Slurm's own detection writes it
// (gpu/nvml and gpu/nvidia: the model name in lower case, spaces as underscores; GFD wrote
// the spaces as dashes, so dashes become underscores too). MIG products (a "-MIG-" word)
// get no alias: a slice is not the whole GPU. An error says why a value cannot be a type.
func GPUTypeFromProduct(product string) (string, error) {
	name := strings.ToLower(strings.TrimSpace(product))
	words := strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == ' ' || r == '_' })
	mig := false
	for _, w := range words {
		mig = mig || w == "mig"
	}
	if !mig {
		for _, a := range gpuAliases {
			for _, w := range words {
				if w == a {
					return a, nil
				}
			}
		}
	}
	typ := strings.Join(words, "_")
	if !gpuTypeRe.MatchString(typ) {
		return "", fmt.Errorf("GPU product %q makes GRES type %q, which is not a letter followed by up to 62 letters, digits, '_', '.' or '-'", product, typ)
	}
	return typ, nil
}

// GPUGres is the GRES of n GPUs of type typ (untyped when empty), "gpu:h100:8" or "gpu:8", as a
// node line registers them and a job asks for them; "" without GPUs.
func GPUGres(typ string, n int64) string {
	switch {
	case n <= 0:
		return ""
	case typ == "":
		return "gpu:" + strconv.FormatInt(n, 10)
	}
	return "gpu:" + typ + ":" + strconv.FormatInt(n, 10)
}
