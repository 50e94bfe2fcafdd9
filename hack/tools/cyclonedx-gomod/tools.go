//go:build tools

// Package tools pins cyclonedx-gomod.
package tools

import _ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
