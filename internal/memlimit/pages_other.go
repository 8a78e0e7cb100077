//go:build !linux

package memlimit

import "errors"

// ReleaseExecutablePages is Linux only (madvise(MADV_PAGEOUT)); elsewhere it does nothing.
func ReleaseExecutablePages() (Released, error) {
	return Released{}, errors.ErrUnsupported
}
