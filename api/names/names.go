// Package names makes deterministic object names: a readable DNS-1123 prefix,
// a dash, and the hex of a sha256 over length-prefixed fields. Buckets and
// effective grants are named this way so that a retry, a restart or another
// process finds the object already made. It is a package of its own because
// the ledger (bucket names) and the API (effective grant names, which the
// controllers and quota denials both use) need it and neither should import
// the other for it.
package names

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Scheme is one family of names.
type Scheme struct {
	// Tag is hashed before the fields ("quotakeeper.bucket/v1"): it keeps
	// families apart and versions the scheme.
	Tag string
	// Fallback is the prefix when the readable part maps to nothing.
	Fallback string
	// PrefixMax bounds the readable prefix, in bytes (it may end one byte
	// past it: a dash is only written with the character after it).
	PrefixMax int
	// HashBytes is how many bytes of the sha256 are hex-encoded.
	HashBytes int
}

// Name returns readable mapped to a DNS-1123 prefix (or Fallback), a dash,
// and the hash of Tag and fields. Each field is length-prefixed before
// hashing, so no two distinct field lists produce the same hash input (plain
// concatenation would make ("ab", "") and ("a", "b") collide, and a separator
// byte can occur inside a field).
func (s Scheme) Name(readable string, fields ...string) string {
	size := binary.MaxVarintLen64 + len(s.Tag)
	for _, f := range fields {
		size += binary.MaxVarintLen64 + len(f)
	}
	buf := make([]byte, 0, size)
	buf = appendField(buf, s.Tag)
	for _, f := range fields {
		buf = appendField(buf, f)
	}
	sum := sha256.Sum256(buf)

	out := make([]byte, 0, max(s.PrefixMax+1, len(s.Fallback))+1+2*s.HashBytes)
	out = appendPrefix(out, readable, s.PrefixMax)
	if len(out) == 0 {
		out = append(out, s.Fallback...)
	}
	out = append(out, '-')
	return string(hex.AppendEncode(out, sum[:s.HashBytes]))
}

func appendField(buf []byte, f string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(f)))
	return append(buf, f...)
}

// appendPrefix appends s mapped to lowercase ASCII alphanumerics separated by
// single dashes, stopping once maxLen bytes are written. Dots are dropped
// too: a DNS-1123 subdomain requires every dot-separated label to start and
// end with an alphanumeric, which is easiest to guarantee by emitting none.
func appendPrefix(out []byte, s string, maxLen int) []byte {
	start := len(out)
	dash := false
	for i := 0; i < len(s) && len(out)-start < maxLen; i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			dash = true
			continue
		}
		if dash && len(out) > start {
			out = append(out, '-')
		}
		dash = false
		out = append(out, c)
	}
	return out
}
