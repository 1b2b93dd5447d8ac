// Package errchain finds an error of a type in an error's chain as errors.As does, with type
// assertions instead of reflection: the errorhandler looks through the chain of every failed
// record several times (its classification, its description), and errors.As was a tenth of
// the cost of dead-lettering a record.
package errchain

import "errors"

// As returns the first error in err's chain that is a T, in the order errors.As visits them
// (the error, then what Unwrap returns, depth first), and whether there was one. When the walk
// meets an error with its own As method before it finds one, it hands the chain to errors.As,
// which honours that method: the result is always what errors.As would give.
func As[T any](err error) (T, bool) {
	v, ok, custom := find[T](err)
	if custom {
		var target T
		ok = errors.As(err, &target)
		return target, ok
	}
	return v, ok
}

// find walks err's chain; custom reports an error with an As method met before the result.
func find[T any](err error) (v T, ok, custom bool) {
	for err != nil {
		if v, ok := err.(T); ok {
			return v, true, false
		}
		if _, has := err.(interface{ As(any) bool }); has {
			return v, false, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if v, ok, custom := find[T](e); ok || custom {
					return v, ok, custom
				}
			}
			return v, false, false
		default:
			return v, false, false
		}
	}
	return v, false, false
}
