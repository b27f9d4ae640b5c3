package container

import (
	"fmt"
	"sort"
	"time"
)

// The image cache's bound (docs/containers.md, "Cache size"). The cache is a volume of the
// compute pod whose kubelet limit (the emptyDir's sizeLimit) evicts the whole pod, killing its
// running jobs, when exceeded. So the helper keeps the images under a lower bound of its own
// (--cache-max) and fails a step whose image does not fit, instead of letting kubelet act.

// CachedImage is one unpacked image of a node's cache, as the eviction decision sees it.
type CachedImage struct {
	Digest   string // the manifest digest's hex: rootfs/HEX
	Size     int64  // bytes on disk, unpacked
	LastUsed time.Time
	// InUse: a container (of a running step, or a named one of a running job) sits on it, or a
	// step is preparing one. Never evicted.
	InUse bool
}

// PlanEviction decides which images to delete so that need more bytes fit under bound beside
// pending (bytes reserved by pulls in progress): least recently used first, never one in use.
// ok is false when even deleting every unused image leaves too little room; then nothing
// should be deleted (a step that fails anyway must not empty the cache of the others). A
// bound of 0 or less is no bound.
func PlanEviction(images []CachedImage, pending, need, bound int64) (victims []string, ok bool) {
	if bound <= 0 {
		return nil, true
	}
	used := pending
	var unused []CachedImage
	for _, im := range images {
		used += im.Size
		if !im.InUse {
			unused = append(unused, im)
		}
	}
	// Oldest first; equal times by digest, so the decision does not depend on listing order.
	sort.Slice(unused, func(i, j int) bool {
		if !unused[i].LastUsed.Equal(unused[j].LastUsed) {
			return unused[i].LastUsed.Before(unused[j].LastUsed)
		}
		return unused[i].Digest < unused[j].Digest
	})
	for _, im := range unused {
		if used+need <= bound {
			break
		}
		victims = append(victims, im.Digest)
		used -= im.Size
	}
	if used+need > bound {
		return nil, false
	}
	return victims, true
}

// Available is what a new image may take of bound: what is neither in use nor reserved.
func Available(images []CachedImage, pending, bound int64) int64 {
	have := bound - pending
	for _, im := range images {
		if im.InUse {
			have -= im.Size
		}
	}
	return max(have, 0)
}

// CacheFullError is the step's error when its image does not fit: one line, in the job's
// output, with the numbers an admin sizes the cache by.
type CacheFullError struct{ Need, Have, Bound int64 }

func (e *CacheFullError) Error() string {
	return fmt.Sprintf("container cache full: need %s, have %s of %s", FormatBytes(e.Need), FormatBytes(e.Have), FormatBytes(e.Bound))
}

// FormatBytes writes n in binary units, as Kubernetes quantities are usually written (Mi, Gi).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
