//go:build !unix

package offheap

import "errors"

func mapAnon(int) ([]byte, error) {
	return nil, errors.New("offheap: no anonymous mappings on this platform")
}

func unmapAnon([]byte) error { return nil }
