package rego

// GenerateAll exposes generateAll to the external tests.
var GenerateAll = generateAll

// Lib returns the lib.quota library source.
func Lib() string {
	b, err := sources.ReadFile(LibPath)
	if err != nil {
		panic(err) // embedded by the directive above
	}
	return string(b)
}
