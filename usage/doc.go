// Package usage reads quotakeeper's bucket figures the way a person asks
// about them (per consumer, resource type and dimensions, in the
// registration's display units) and prints them as a kubectl table. The
// kubectl plugin (`kubectl quota usage`, `explain`) and the live table of
// `make run` share it, so both show the same rows the same way.
package usage
