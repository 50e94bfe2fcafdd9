// Package rego holds quotakeeper's Rego: the lib.quota library that every
// quota ConstraintTemplate embeds through its libs, and the sources of the
// templates in templates/ (one directory each: src.rego, the template's
// Rego; skeleton.yaml, the ConstraintTemplate without its code). Templates
// generates the templates from them; quotactl generate writes the result to
// templates/<name>/template.yaml.
//
// The sources are embedded so that the generator and the tests use exactly
// the files of this build, not whatever a working directory holds.
package rego

import "embed"

//go:embed lib/quota.rego templates/*/src.rego templates/*/skeleton.yaml
var sources embed.FS

// LibPath is the library's path in this directory.
const LibPath = "lib/quota.rego"
