package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// row is one line of the table: a series and the errors met making it.
type row struct {
	name string
	s    series
	ids  []string // the sandboxes of s
	errs []string
	hits int // how many of ids were warm pool members
}

// done checks and stops the sandboxes a mode used; the freshness check
// runs after the clock, so it costs no measured time.
func (b *bencher) done(ctx context.Context, ids []string) {
	for _, id := range ids {
		b.fresh.check(ctx, b.c, id)
		b.c.StopSandbox(ctx, id)
	}
}

// sequential makes n creates one after another; after each, between
// waits (for the pool to refill) given the time of the create.
func (b *bencher) sequential(ctx context.Context, sh shape, n int, between func(claim time.Time)) row {
	r := row{name: sh.name + ", sequential"}
	for i := 0; i < n; i++ {
		claim := time.Now()
		d, id, err := b.measure(ctx, sh)
		if id != "" {
			b.done(ctx, []string{id})
		}
		if err != nil {
			r.errs = append(r.errs, err.Error())
		} else {
			r.s, r.ids = append(r.s, d), append(r.ids, id)
		}
		if between != nil {
			between(claim)
		}
	}
	return r
}

// staggered starts a create every interval, each measured from its own
// request, however long the earlier ones take.
func (b *bencher) staggered(ctx context.Context, sh shape, n int, every time.Duration) row {
	r := row{name: fmt.Sprintf("%s, staggered %v", sh.name, every)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; i < n; i++ {
		if i > 0 {
			<-tick.C
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.collect(ctx, sh, &mu, &r, &ids)
		}()
	}
	wg.Wait()
	b.done(ctx, ids)
	return r
}

// burst makes rounds of size parallel creates until n have been measured
// (or failed); between runs after each round, given its start.
func (b *bencher) burst(ctx context.Context, sh shape, n, size int, between func(start time.Time)) row {
	r := row{name: fmt.Sprintf("%s, bursts of %d", sh.name, size)}
	for len(r.s)+len(r.errs) < n {
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ids []string
		for i := 0; i < size; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.collect(ctx, sh, &mu, &r, &ids)
			}()
		}
		wg.Wait()
		b.done(ctx, ids)
		if between != nil {
			between(start)
		}
	}
	return r
}

func (b *bencher) collect(ctx context.Context, sh shape, mu *sync.Mutex, r *row, ids *[]string) {
	d, id, err := b.measure(ctx, sh)
	mu.Lock()
	defer mu.Unlock()
	if id != "" {
		*ids = append(*ids, id)
	}
	if err != nil {
		r.errs = append(r.errs, err.Error())
	} else {
		r.s, r.ids = append(r.s, d), append(r.ids, id)
	}
}
