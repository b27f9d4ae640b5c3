package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// ValidateScript checks a prolog or epilog as slurmd will run it: executed directly, so it
// needs a #! line, and it holds no NUL (a shell stops reading there).
func ValidateScript(src string) error {
	if !strings.HasPrefix(src, "#!") {
		return fmt.Errorf("must start with a #! line: slurmd executes the file directly")
	}
	if strings.ContainsRune(src, 0) {
		return fmt.Errorf("contains a NUL byte")
	}
	return nil
}

// validateServices checks the run scripts of s6 services: s6 executes them directly, like
// slurmd its prolog.
func validateServices(services []sunkv1.S6Service, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range services {
		if err := ValidateScript(s.Run); err != nil {
			errs = append(errs, field.Invalid(p.Index(i).Child("run"), "(script)", err.Error()))
		}
	}
	return errs
}
