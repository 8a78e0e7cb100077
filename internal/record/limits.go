package record

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for DecodeJSONLimits (config: limits.max_json_depth, limits.max_records_per_batch).
const (
	DefaultMaxJSONDepth = 64
	DefaultMaxBatch     = 1000
)

// LimitError is JSON refused before unmarshalling because it nests too deep or its top-level
// array holds too many items. Receivers count it as reason "limits".
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// IsLimit reports whether err is (or wraps) a *LimitError.
func IsLimit(err error) bool {
	var le *LimitError
	return errors.As(err, &le)
}

// CheckJSON scans JSON text without decoding it and refuses nesting deeper than maxDepth or a
// top-level array of more than maxItems items (0 disables a check). It reads bytes outside
// strings only, so it is cheap enough to run before json.Unmarshal allocates anything: an
// 8 MiB body of `[{},{},…]` would otherwise become millions of records.
func CheckJSON(data []byte, maxDepth, maxItems int) error {
	depth, commas := 0, 0
	topArray, inString := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth == 0 && c == '[' {
				topArray = true
			}
			depth++
			if maxDepth > 0 && depth > maxDepth {
				return &LimitError{Msg: fmt.Sprintf("JSON nests deeper than the limit of %d", maxDepth)}
			}
		case '}', ']':
			depth--
		case ',':
			// n items are separated by n-1 commas at depth 1 of the top-level array.
			if depth == 1 && topArray {
				commas++
				if maxItems > 0 && commas >= maxItems {
					return &LimitError{Msg: fmt.Sprintf("batch holds more than the limit of %d items", maxItems)}
				}
			}
		}
	}
	return nil
}

// DecodeJSONLimits is DecodeJSON refusing, before unmarshalling, JSON deeper than maxDepth or
// a batch of more than maxRecords records (a *LimitError; 0 takes the defaults).
func DecodeJSONLimits(data []byte, now time.Time, maxDepth, maxRecords int) ([]*Record, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxJSONDepth
	}
	if maxRecords <= 0 {
		maxRecords = DefaultMaxBatch
	}
	if err := CheckJSON(data, maxDepth, maxRecords); err != nil {
		return nil, err
	}
	return DecodeJSON(data, now)
}
