package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"testing/fstest"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// admissionReview writes the AdmissionReview for st (obj, its object, with
// its Admission block) into the overlay, under the suite's directory, and
// returns its path relative to the suite, as gator expects an object path.
func (r *Runner) admissionReview(s *Suite, st Step, obj *unstructured.Unstructured) (string, error) {
	a := *st.Admission
	if a.OldObject != "" {
		old, err := r.readObject(path.Join(path.Dir(s.path), a.OldObject))
		if err != nil {
			return "", fmt.Errorf("oldObject: %w", err)
		}
		return r.writeReview(s, obj, &a, old)
	}
	return r.writeReview(s, obj, &a, nil)
}

// writeReview writes the AdmissionReview of obj (and old, when not nil)
// under a's operation, uid and dryRun into the overlay; a.OldObject is not
// read.
func (r *Runner) writeReview(s *Suite, obj *unstructured.Unstructured, a *Admission, old *unstructured.Unstructured) (string, error) {
	op := admissionv1.Operation(a.Operation)
	if op == "" {
		op = admissionv1.Create
	}
	gvk := obj.GroupVersionKind()
	req := &admissionv1.AdmissionRequest{
		UID:         types.UID(a.UID),
		Kind:        metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		SubResource: a.SubResource,
		Name:        obj.GetName(),
		Namespace:   obj.GetNamespace(),
		Operation:   op,
	}
	if a.Resource != nil {
		req.Resource = *a.Resource
	}
	if isScale(obj) {
		if a.Resource == nil {
			return "", errors.New("admission.resource: required for a Scale: the resource it scales, e.g. {group: apps, version: v1, resource: deployments}")
		}
		if req.SubResource == "" {
			req.SubResource = "scale"
		}
	}
	if a.DryRun {
		req.DryRun = &a.DryRun
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return "", err
	}
	// A DELETE carries only the old object; gator and Gatekeeper review it as the object.
	if op != admissionv1.Delete {
		req.Object = runtime.RawExtension{Raw: raw}
	}
	if old != nil {
		if req.OldObject.Raw, err = old.MarshalJSON(); err != nil {
			return "", err
		}
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request:  req,
	}
	data, err := json.Marshal(review)
	if err != nil {
		return "", err
	}
	return r.files.add(path.Dir(s.path), data), nil
}

func (r *Runner) readObject(p string) (*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(r.files, p)
	if err != nil {
		return nil, err
	}
	objs, err := reader.ReadUnstructureds(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s: defines %d objects, want 1", p, len(objs))
	}
	return objs[0], nil
}

// overlay is a file system that serves generated files over a base one.
type overlay struct {
	base fs.FS

	mu    sync.Mutex
	files fstest.MapFS
	n     int
}

func newOverlay(base fs.FS) *overlay { return &overlay{base: base, files: fstest.MapFS{}} }

// add stores data as a new file under dir and returns its path relative to dir.
func (o *overlay) add(dir string, data []byte) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	rel := fmt.Sprintf(".quotactl/admission-%d.json", o.n)
	o.files[path.Join(dir, rel)] = &fstest.MapFile{Data: data, Mode: 0o444}
	return rel
}

func (o *overlay) Open(name string) (fs.File, error) {
	o.mu.Lock()
	_, ok := o.files[name]
	o.mu.Unlock()
	if ok {
		return o.files.Open(name)
	}
	return o.base.Open(name)
}
