package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestForEach(t *testing.T) {
	got, err := forEach(context.Background(), 100, 7, func(i int) (int, error) { return i * i, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != i*i {
			t.Fatalf("result %d = %d, want %d", i, v, i*i)
		}
	}
	// A failing point is reported with its index, and stops the sweep.
	boom := errors.New("boom")
	var dones []int
	_, err = forEach(context.Background(), 50, 1, func(i int) (int, error) {
		if i == 3 {
			return 0, boom
		}
		return i, nil
	}, func(d int) { dones = append(dones, d) })
	if !errors.Is(err, boom) || err.Error() != "point 4: boom" {
		t.Errorf("error = %v, want point 4: boom", err)
	}
	if len(dones) >= 50 || !slices.IsSorted(dones) {
		t.Errorf("done counts = %v: the sweep did not stop", dones)
	}
	// A cancelled context stops the sweep.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := forEach(ctx, 10, 2, func(i int) (int, error) { return i, nil }, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: error = %v", err)
	}
}

func TestForEachPanic(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "in progress") {
			t.Errorf("recovered %v, want the worker's panic", r)
		}
	}()
	forEach(context.Background(), 10, 3, func(i int) (int, error) {
		if i == 5 {
			panic("in progress")
		}
		return i, nil
	}, nil)
	t.Error("forEach returned after a worker panicked")
}

func TestLogSpace(t *testing.T) {
	if got, want := logSpaceInts(1000, 100_000_000, 6), []int{1000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000}; !slices.Equal(got, want) {
		t.Errorf("logSpaceInts = %v, want %v", got, want)
	}
	// A narrow integer range drops repeats.
	if got, want := logSpaceInts(1, 3, 10), []int{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("logSpaceInts(1, 3, 10) = %v, want %v", got, want)
	}
	if got := logSpace(0.5, 8, 2); got[0] != 0.5 || got[1] != 8 {
		t.Errorf("logSpace ends = %v, want exact", got)
	}
}
