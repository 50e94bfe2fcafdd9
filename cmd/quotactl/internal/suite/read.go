package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Read finds the suites at target in fsys the way gator does
// (verify.ReadSuites: a Suite file, or the Suite files of a directory and,
// when recursive, of its subdirectories) and parses each strictly into the
// extended types: a misspelt field is an error, not a silently ignored
// expectation.
func Read(fsys fs.FS, target, original string, recursive bool) ([]*Suite, error) {
	found, err := verify.ReadSuites(fsys, target, original, recursive)
	if err != nil {
		return nil, err
	}
	out := make([]*Suite, 0, len(found))
	for _, g := range found {
		data, err := fs.ReadFile(fsys, g.AbsolutePath)
		if err != nil {
			return nil, err
		}
		s, err := parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.InputPath, err)
		}
		s.path, s.input = g.AbsolutePath, g.InputPath
		if err := s.validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", g.InputPath, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// parse reads YAML as gator does (YAML 1.2 through go.yaml.in/yaml/v3, so
// `violations: no` is the string "no", then JSON into the types) but rejects
// unknown fields.
func parse(data []byte) (*Suite, error) {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if unknown := unknownFields(m, reflect.TypeFor[Suite](), ""); len(unknown) > 0 {
		return nil, fmt.Errorf("unknown fields: %s", strings.Join(unknown, ", "))
	}
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &Suite{}
	if err := json.Unmarshal(j, s); err != nil {
		return nil, err
	}
	return s, nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// unknownFields lists the paths of keys in v that t has no field for, so a
// misspelt expectation is reported where it is ("tests[0].cases[2].admision")
// rather than silently ignored. Types that decode themselves
// (json.Unmarshaler) and Kubernetes object metadata are not looked into.
func unknownFields(v any, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || t == reflect.TypeFor[metav1.ObjectMeta]() {
		return nil
	}
	var out []string
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil // a type error; encoding/json reports it
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			fields[name] = f.Type
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				out = append(out, p)
				continue
			}
			out = append(out, unknownFields(m[k], ft, p)...)
		}
	case reflect.Slice:
		items, _ := v.([]any)
		for i, item := range items {
			out = append(out, unknownFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}

var operations = []string{"CREATE", "UPDATE", "DELETE", "CONNECT"}

// validate reports structural mistakes with the path of the field, before
// anything runs.
func (s *Suite) validate() error {
	var errs []error
	fail := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	for i, t := range s.Tests {
		tp := fmt.Sprintf("tests[%d]", i)
		if t.Invalid && len(t.Cases) > 0 {
			fail(tp, "invalid and cases are mutually exclusive")
		}
		for j, c := range t.Cases {
			cp := fmt.Sprintf("%s.cases[%d]", tp, j)
			if c.Name == "" {
				fail(cp+".name", "required")
			}
			if len(c.Steps) > 0 {
				if c.Object != "" || c.Admission != nil || len(c.Assertions) > 0 {
					fail(cp, "steps and object/admission/assertions are mutually exclusive: put them in the steps")
				}
				for k, st := range c.Steps {
					sp := fmt.Sprintf("%s.steps[%d]", cp, k)
					if st.Object == "" {
						fail(sp+".object", "required")
					}
					if len(st.Assertions) == 0 {
						fail(sp+".assertions", "required: state the expected decision of every step")
					}
					validateAdmission(sp+".admission", st.Admission, fail)
					validateUsage(sp+".usage", st.Usage, fail)
				}
			}
			validateAdmission(cp+".admission", c.Admission, fail)
			validateUsage(cp+".usage", c.Usage, fail)
		}
	}
	return errors.Join(errs...)
}

func validateAdmission(path string, a *Admission, fail func(string, string, ...any)) {
	if a == nil {
		return
	}
	if a.Operation != "" && !slices.Contains(operations, a.Operation) {
		fail(path+".operation", "must be one of %s, got %q", strings.Join(operations, ", "), a.Operation)
	}
	if a.OldObject != "" && a.Operation != "UPDATE" && a.Operation != "DELETE" {
		fail(path+".oldObject", "only for UPDATE and DELETE")
	}
	if a.Operation == "DELETE" && a.OldObject == "" {
		fail(path+".oldObject", "required for DELETE (a DELETE review carries only the old object)")
	}
}

func validateUsage(path string, us []Usage, fail func(string, string, ...any)) {
	for i, u := range us {
		up := fmt.Sprintf("%s[%d]", path, i)
		if u.Consumer.Kind == "" {
			fail(up+".consumer.kind", "required")
		}
		if u.Consumer.Name == "" {
			fail(up+".consumer.name", "required")
		}
		if u.ResourceType == "" {
			fail(up+".resourceType", "required")
		}
		if u.Limit == nil && u.Allocated == nil && u.Reserved == nil && u.Available == nil {
			fail(up, "expect at least one of limit, allocated, reserved, available")
		}
	}
}
