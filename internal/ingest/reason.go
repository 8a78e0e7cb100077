package ingest

import "github.com/ragwatch/ragwatch/internal/record"

// DecodeReason is the rejection reason of an error from one of internal/record's decoders
// (records, feedback, labels), the same for every transport: ReasonLimits for JSON refused
// before decoding (record.IsLimit), ReasonMalformed for input that is not JSON of the expected
// shape (record.IsMalformed), ReasonInvalid for a decodable value that fails validation.
func DecodeReason(err error) string {
	switch {
	case record.IsLimit(err):
		return ReasonLimits
	case record.IsMalformed(err):
		return ReasonMalformed
	}
	return ReasonInvalid
}
