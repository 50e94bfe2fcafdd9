package observer

// BeforeEvaluate makes o call fn with each object's kind, namespace and
// name before evaluating it (fn may panic, to show what a panic does). Set
// it before o starts.
func BeforeEvaluate(o *Observer, fn func(kind, namespace, name string)) {
	o.beforeEvaluate = func(it item) { fn(it.gvk.Kind, it.namespace, it.name) }
}
