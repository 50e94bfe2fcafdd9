package celpolicy

import (
	"fmt"
	"strings"
)

// segment is one piece of a template: literal text, or a CEL expression
// written between {{ and }}.
type segment struct {
	// text is the literal text, or the expression as CEL reads it.
	text string
	// written is the segment as the policy wrote it, braces included, for
	// error messages.
	written string
	expr    bool
}

// IsTemplate reports whether a string field holds {{ expr }} segments.
func IsTemplate(s string) bool { return strings.Contains(s, "{{") }

// splitTemplate splits s into literal and expression segments. An
// expression runs from {{ to the first }} outside CEL string literals and
// outside braces it opened (so {{ {"a": 1}["a"] }} works). The leading-dot
// form {{.trigger.metadata.name}} (seed 002, after Go templates) reads as
// trigger.metadata.name.
func splitTemplate(s string) ([]segment, error) {
	var segs []segment
	for {
		start := strings.Index(s, "{{")
		if start < 0 {
			if s != "" {
				segs = append(segs, segment{text: s, written: s})
			}
			return segs, nil
		}
		if start > 0 {
			segs = append(segs, segment{text: s[:start], written: s[:start]})
		}
		end, err := closing(s[start+2:])
		if err != nil {
			return nil, err
		}
		inner := s[start+2 : start+2+end]
		written := s[start : start+2+end+2]
		expr := strings.TrimSpace(inner)
		if len(expr) > 1 && expr[0] == '.' && isIdentStart(expr[1]) {
			expr = expr[1:]
		}
		if expr == "" {
			return nil, fmt.Errorf("%s holds no expression", written)
		}
		segs = append(segs, segment{text: expr, written: written, expr: true})
		s = s[start+2+end+2:]
	}
}

// closing returns the index in s (the text after a "{{") of the "}}" that
// closes the expression.
func closing(s string) (int, error) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\'':
			n, err := skipString(s[i:])
			if err != nil {
				return 0, err
			}
			i += n - 1
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			return i, nil
		}
	}
	return 0, fmt.Errorf("{{ is not closed by }}")
}

// skipString returns the length of the CEL string literal s starts with
// (quoted with ' or ", single or triple, with backslash escapes).
func skipString(s string) (int, error) {
	quote := s[:1]
	if strings.HasPrefix(s, strings.Repeat(quote, 3)) {
		quote = s[:3]
	}
	for i := len(quote); i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if strings.HasPrefix(s[i:], quote) {
			return i + len(quote), nil
		}
	}
	return 0, fmt.Errorf("string literal %s is not closed", s)
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}
