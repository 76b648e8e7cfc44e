package cputime

import "testing"

// TestProcess: the CPU time grows while this process computes.
func TestProcess(t *testing.T) {
	before, err := Process()
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	for after := before; after <= before; {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if after, err = Process(); err != nil {
			t.Fatal(err)
		}
	}
	_ = x
}
