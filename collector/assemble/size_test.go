package assemble

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
		if got := allocBytes(n, false); got != want {
			t.Fatalf("allocBytes(%d) = %d, want %d", n, got, want)
		}
	}
	if got := allocBytes(1000, true); got != 1024 {
		t.Fatalf("1000 bytes with pointers: %d, want 1024 (8-byte header)", got)
	}
	if got := allocBytes(1020, true); got != 1152 {
		t.Fatalf("1020 bytes with pointers: %d, want 1152", got)
	}
}
