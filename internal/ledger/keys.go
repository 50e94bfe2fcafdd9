package ledger

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakeeper/quotakeeper/api/names"
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

// bucketNames: the prefix stays well under the 253-character limit and
// readable in kubectl output; 16 bytes of sha256 (32 hex characters, 128
// bits) make a collision between two buckets' object names practically
// impossible.
var bucketNames = names.Scheme{Tag: "quotakeeper.bucket/v1", Fallback: "bucket", PrefixMax: 48, HashBytes: 16}

// Name returns a deterministic DNS-1123 subdomain name for the bucket's
// object: a readable prefix derived from the resource type, then a hash over
// every key field (names.Scheme length-prefixes each, so {Name:"ab"} and
// {Namespace:"a", Name:"b"} do not collide).
func (k BucketKey) Name() string {
	c := k.Consumer
	return bucketNames.Name(k.ResourceType, c.APIGroup, c.Kind, c.Namespace, c.Name, k.ResourceType, k.Dimensions)
}
