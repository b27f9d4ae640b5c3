package wellknown

import "testing"

// Real GPU Feature Discovery nvidia.com/gpu.product values, to the GRES type sunk registers.
func TestGPUTypeFromProduct(t *testing.T) {
	for product, want := range map[string]string{
		"NVIDIA-H100-80GB-HBM3":             "h100",
		"NVIDIA-H100-NVL":                   "h100",
		"NVIDIA-H100-PCIe":                  "h100",
		"NVIDIA-H200":                       "h200",
		"NVIDIA-H200-141GB-HBM3e":           "h200",
		"NVIDIA-B200":                       "b200",
		"NVIDIA-A100-SXM4-80GB":             "a100",
		"NVIDIA-A100-PCIE-40GB":             "a100",
		"NVIDIA-L40S":                       "l40s",
		"NVIDIA-L40":                        "nvidia_l40",           // not an L40S
		"NVIDIA-GH200-480GB":                "nvidia_gh200_480gb",   // "h200" is not a word of it
		"Tesla-V100-SXM2-16GB":              "tesla_v100_sxm2_16gb", // Slurm's detection: tesla_v100-sxm2-16gb
		"Tesla-T4":                          "tesla_t4",
		"NVIDIA-GeForce-RTX-4090":           "nvidia_geforce_rtx_4090",
		"NVIDIA-A10G":                       "nvidia_a10g",
		"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb": "nvidia_h100_80gb_hbm3_mig_1g.10gb", // a slice is no h100
	} {
		got, err := GPUTypeFromProduct(product)
		if err != nil || got != want {
			t.Errorf("GPUTypeFromProduct(%q) = %q, %v; want %q", product, got, err, want)
		}
	}
	// Kubernetes label values are [A-Za-z0-9_.-]; what they allow that a type must not be.
	for _, product := range []string{"", "8", "3090-Ti", "-", "A" + string(make([]byte, 63))} {
		if got, err := GPUTypeFromProduct(product); err == nil {
			t.Errorf("GPUTypeFromProduct(%q) = %q, want an error", product, got)
		}
	}
}

func TestGPUGres(t *testing.T) {
	for _, c := range []struct {
		typ  string
		n    int64
		want string
	}{{"h100", 8, "gpu:h100:8"}, {"", 2, "gpu:2"}, {"h100", 0, ""}, {"", -1, ""}} {
		if got := GPUGres(c.typ, c.n); got != c.want {
			t.Errorf("GPUGres(%q, %d) = %q, want %q", c.typ, c.n, got, c.want)
		}
	}
}
