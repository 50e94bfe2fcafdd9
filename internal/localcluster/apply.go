package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadObjects decodes every document of the given YAML files.
func ReadObjects(paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		decoded, err := DecodeObjects(path, data)
		if err != nil {
			return nil, err
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// DecodeObjects decodes every non-empty document of data; source names
// where data came from in errors.
func DecodeObjects(source string, data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// Apply server-side applies objects in order, retrying each until its kind
// exists (a constraint's CRD appears only once Gatekeeper has compiled its
// template) or the timeout passes.
func (c *Cluster) Apply(ctx context.Context, timeout time.Duration, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		deadline := time.Now().Add(timeout)
		for {
			err := c.Client.Patch(ctx, obj.DeepCopy(), client.Apply, client.FieldOwner("quotakeeper-local"), client.ForceOwnership)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			if !meta.IsNoMatchError(err) && !isRetriable(err) {
				return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}

// ApplyFiles reads and applies YAML files in order.
func (c *Cluster) ApplyFiles(ctx context.Context, timeout time.Duration, paths ...string) error {
	objs, err := ReadObjects(paths...)
	if err != nil {
		return err
	}
	return c.Apply(ctx, timeout, objs...)
}
