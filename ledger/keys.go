package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// BucketKey identifies a bucket. It is comparable so it can key maps, which is
// why dimensions are held in canonical string form rather than as a map.
type BucketKey struct {
	Consumer     Consumer
	ResourceType string
	// Dimensions is labels.Set(dims).String(): "k=v" pairs, sorted, joined
	// with ",". Equal dimension maps always give equal strings.
	Dimensions string
}

// NewBucketKey builds the key of the bucket for consumer c, resource type and
// dimensions. Dimension keys and values must use label syntax (the ledger
// validates requests); otherwise two different maps could share a key.
func NewBucketKey(c Consumer, resourceType string, dims map[string]string) BucketKey {
	return BucketKey{Consumer: c, ResourceType: resourceType, Dimensions: labels.Set(dims).String()}
}

// DimensionSet parses Dimensions back into a label set for selector matching.
func (k BucketKey) DimensionSet() labels.Set {
	set := labels.Set{}
	if k.Dimensions == "" {
		return set
	}
	for _, pair := range strings.Split(k.Dimensions, ",") {
		name, value, _ := strings.Cut(pair, "=")
		set[name] = value
	}
	return set
}

func (k BucketKey) String() string {
	c := k.Consumer
	return fmt.Sprintf("%s/%s %s/%s %s{%s}", c.APIGroup, c.Kind, c.Namespace, c.Name, k.ResourceType, k.Dimensions)
}

const (
	// namePrefixMax leaves the name well under the 253-character limit and
	// keeps it readable in kubectl output.
	namePrefixMax = 48
	// nameHashBytes of sha256 (32 hex characters, 128 bits) make a collision
	// between two buckets' object names practically impossible.
	nameHashBytes = 16
)

// Name returns a deterministic DNS-1123 subdomain name for the bucket's
// object: a readable prefix derived from the resource type, then a hash over
// every key field. Each field is length-prefixed before hashing, so no two
// distinct keys can produce the same hash input (plain concatenation would
// make {Name:"ab"} and {Namespace:"a", Name:"b"} collide).
func (k BucketKey) Name() string {
	c := k.Consumer
	fields := [...]string{"quotakeeper.bucket/v1", c.APIGroup, c.Kind, c.Namespace, c.Name, k.ResourceType, k.Dimensions}
	size := 0
	for _, f := range fields {
		size += binary.MaxVarintLen64 + len(f)
	}
	buf := make([]byte, 0, size)
	for _, f := range fields {
		buf = binary.AppendUvarint(buf, uint64(len(f)))
		buf = append(buf, f...)
	}
	sum := sha256.Sum256(buf)
	out := make([]byte, 0, namePrefixMax+1+len("bucket-")+2*nameHashBytes)
	out = appendNamePrefix(out, k.ResourceType)
	if len(out) == 0 {
		out = append(out, "bucket"...)
	}
	out = append(out, '-')
	return string(hex.AppendEncode(out, sum[:nameHashBytes]))
}

// appendNamePrefix appends s mapped to lowercase ASCII alphanumerics
// separated by single dashes, at most namePrefixMax bytes. Dots are dropped
// too: a DNS-1123 subdomain requires every dot-separated label to start and
// end with an alphanumeric, which is easiest to guarantee by emitting none.
func appendNamePrefix(out []byte, s string) []byte {
	start := len(out)
	dash := false
	for i := 0; i < len(s) && len(out)-start < namePrefixMax; i++ {
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
