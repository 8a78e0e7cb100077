package offheap

import "testing"

// TestAllocBytesIsTheSizeClass checks the lookup tables against a scan of the size classes.
func TestAllocBytesIsTheSizeClass(t *testing.T) {
	for n := int64(1); n <= 40000; n++ {
		want := (n + 8191) &^ 8191
		for _, c := range sizeClasses {
			if c >= n {
				want = c
				break
			}
		}
		if got := AllocBytes(n, false); got != want {
			t.Fatalf("AllocBytes(%d) = %d, want %d", n, got, want)
		}
	}
	if got := AllocBytes(1000, true); got != 1024 {
		t.Fatalf("1000 bytes with pointers: %d, want 1024 (8-byte header)", got)
	}
	if got := AllocBytes(1020, true); got != 1152 {
		t.Fatalf("1020 bytes with pointers: %d, want 1152", got)
	}
	for s, want := range map[string]int64{"": 0, "a": 16, "0123456789abcde": 16, "0123456789abcdef": 16, "0123456789abcdefg": 24} {
		if got := StringBytes(s); got != want {
			t.Errorf("StringBytes(%q) = %d, want %d", s, got, want)
		}
	}
}
