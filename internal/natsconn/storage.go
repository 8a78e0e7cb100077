package natsconn

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// JetStream error codes of a refused write for lack of space (nats-server errors.json).
const (
	codeInsufficientResources = 10023 // the server's store limit (max_store) is used up
	codeStorageExceeded       = 10047 // a new stream's cap does not fit the store
	codeStoreFailed           = 10077 // a stream at its max_bytes with discard new, or a failing disk
)

// IsStorageFull reports whether err is JetStream refusing a write or a new stream for lack of
// storage: the server's max_store is used up, the stream or bucket reached its max_bytes, or
// the disk is full. Callers count such refusals as storage_full rather than as an outage.
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case codeInsufficientResources, codeStorageExceeded:
			return true
		case codeStoreFailed:
			return isSpaceText(apiErr.Description)
		}
		if apiErr.ErrorCode != 0 {
			return false
		}
		return isSpaceText(apiErr.Description)
	}
	return isSpaceText(err.Error())
}

func isSpaceText(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "maximum bytes exceeded") || strings.Contains(s, "insufficient resources") ||
		strings.Contains(s, "insufficient storage") || strings.Contains(s, "no space left")
}
