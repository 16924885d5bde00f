package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// pointError is the error of one point of a sweep.
type pointError struct {
	index int
	err   error
}

// forEach calls f(i) for i in [0, n) on at most workers goroutines and
// returns the results in index order. onDone, if not nil, is called with the
// number of finished points after each one, from the calling goroutine. The
// first failing point (lowest index among those that ran) cancels the rest;
// so does ctx. A panic in f is re-raised on the calling goroutine.
func forEach[T any](ctx context.Context, n, workers int, f func(i int) (T, error), onDone func(done int)) ([]T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]T, n)
	errs := make([]error, n)
	var (
		mu       sync.Mutex
		panicked any
	)
	jobs := make(chan int)
	finished := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range jobs {
				func() {
					defer func() {
						if r := recover(); r != nil {
							mu.Lock()
							if panicked == nil {
								panicked = fmt.Sprintf("%v\n\ngoroutine of point %d:\n%s", r, i, debug.Stack())
							}
							mu.Unlock()
							cancel()
						}
					}()
					results[i], errs[i] = f(i)
					if errs[i] != nil {
						cancel()
					}
				}()
				finished <- i
			}
		})
	}
	go func() {
		defer close(jobs)
		for i := range n {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(finished)
	}()
	done := 0
	for range finished {
		done++
		if onDone != nil {
			onDone(done)
		}
	}
	if panicked != nil {
		panic(panicked)
	}
	for i, err := range errs {
		if err != nil {
			return nil, &pointError{i, err}
		}
	}
	if done < n {
		return nil, context.Cause(ctx)
	}
	return results, nil
}

func (e *pointError) Error() string { return fmt.Sprintf("point %d: %v", e.index+1, e.err) }
func (e *pointError) Unwrap() error { return e.err }
