// Package eventnote fits text into an Event's note. The API server refuses
// an Event whose note is over 1 KiB, and a refused Event is an audit record
// lost, so every recorder of ours cuts its note here first.
package eventnote

import "unicode/utf8"

// Limit is the API server's cap on an Event's note, in bytes.
const Limit = 1024

// Fit returns s cut to fit within Limit bytes, at a rune boundary, with
// "..." marking the cut.
func Fit(s string) string {
	return FitIn(s, Limit)
}

// FitIn is Fit for a part of a note that must leave room for the rest.
func FitIn(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
