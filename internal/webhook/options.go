package webhook

import "sunk.dev/sunk/internal/validation"

// Options are the operator's admission settings.
type Options struct {
	// Validation are the rules' settings; the controllers' re-check must be given the same,
	// or the controller would refuse what admission let in.
	Validation validation.Options
	// Authors may write the fields that give root on compute hosts (authors.go): the
	// operator's flags --privileged-authors-*, the sunk chart's operator.privilegedAuthors.
	// Only admission knows who writes a spec, so the controllers do not check them.
	Authors Authors
}
