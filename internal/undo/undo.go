// Package undo is the one way a function that makes things in steps (a
// sandbox's start, a server's) gives them back when a later step fails:
// each step that made something adds its release to a List, and the List,
// deferred on the function's named error, runs the releases in reverse
// order when that error is not nil, and none of them when it is.
//
//	func start() (_ *Thing, retErr error) {
//		var u undo.List
//		defer u.Run(&retErr)
//		a, err := makeA()
//		if err != nil {
//			return nil, err
//		}
//		u.Add(func() { a.Close() })
//		...
//	}
//
// A release returns nothing: as in the hand-written deferred releases it
// replaces, what a release does with its own failure (log it, or ignore it
// as best effort) is the release's, and the function's error is the one its
// caller gets. A release that must add to that error (what a failed boot's
// console said) sets the function's named error itself.
//
// It imports only the standard library, so that every package may use it.
package undo

// List is the releases of what a function made so far. The zero List is
// empty and ready to use; a List is not safe for concurrent use (it is one
// function's).
type List struct {
	releases []func()
}

// Add adds release, to be run if the function fails, before every release
// added earlier.
func (l *List) Add(release func()) {
	l.releases = append(l.releases, release)
}

// Run runs the releases, the last added first, when *errp is not nil, and
// forgets them either way. Defer it with the address of the function's
// named error: `defer u.Run(&retErr)`.
func (l *List) Run(errp *error) {
	releases := l.releases
	l.releases = nil
	if *errp == nil {
		return
	}
	for i := len(releases) - 1; i >= 0; i-- {
		releases[i]()
	}
}
