package ledger

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrQuotaExceeded matches every *RefusedError via errors.Is.
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrInvalid matches every *ValidationError via errors.Is.
	ErrInvalid = errors.New("invalid input")
	// errUnchanged is returned by the ledger's own mutate functions when the
	// bucket needs no write (replay, nothing to release, limit already
	// current). Store.Apply then writes nothing, which spares a Kubernetes
	// store a no-op update; the ledger treats it as success.
	errUnchanged = errors.New("bucket unchanged")
)

// RefusedError is returned by a mutate function (and so by Store.Apply) when
// a bucket cannot take an amount. It is a distinct type so that a
// group-committing store can drop just this caller's mutation from a batch
// and still commit the others'. The numbers are the bucket's state that
// decided the refusal.
type RefusedError struct {
	Bucket       string // key.Name()
	Key          BucketKey
	ResourceType string
	Requested    int64
	Limit        int64
	Allocated    int64
	Reserved     int64
	Available    int64
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v: bucket %s: %s", ErrQuotaExceeded, e.Bucket,
		deniedMessage(e.Requested, e.ResourceType, Usage{Limit: e.Limit, Allocated: e.Allocated, Reserved: e.Reserved, Available: e.Available}))
}

func (e *RefusedError) Is(target error) bool { return target == ErrQuotaExceeded }

// FieldError is one problem with one field, named by its path in the input
// (e.g. "requests[1].amount").
type FieldError struct {
	Field  string
	Detail string
	Err    error // optional cause, e.g. wrapping ErrOverflow
}

func (e FieldError) Error() string { return e.Field + ": " + e.Detail }
func (e FieldError) Unwrap() error { return e.Err }

// ValidationError lists every problem found in a claim or grant; it is
// reported before anything is written.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		errs[i] = fe
	}
	return errs
}
