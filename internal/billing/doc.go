// Package billing turns what a sandbox uses into money: the price table and
// the arithmetic of cost, in integer USD billionths (nanos) so that nothing
// is lost to rounding; the API shows millionths (micros).
//
// It imports nothing of this module.
package billing
