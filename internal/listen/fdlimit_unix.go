//go:build unix

package listen

import "syscall"

// FDLimit is the soft RLIMIT_NOFILE, raised to the hard limit first if it is lower. Go's
// runtime already raises it at start (to the hard limit less one, go.dev/issue/46279); this
// covers a limit lowered since, and reports what the caps are derived from. 0 when unknown.
func FDLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max-1 {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim.Cur = lim.Max
		}
	}
	return uint64(lim.Cur)
}
