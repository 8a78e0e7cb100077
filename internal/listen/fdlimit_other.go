//go:build !unix

package listen

// FDLimit is 0 where there is no RLIMIT_NOFILE: the caps follow the memory limit alone.
func FDLimit() uint64 { return 0 }
