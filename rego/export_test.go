package rego

// GenerateAll exposes generateAll to the external tests.
var GenerateAll = generateAll
