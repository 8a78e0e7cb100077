// Package otlpwire reads protobuf messages field by field with the rules and the error words
// of the OpenTelemetry Collector's pdata decoder (go.opentelemetry.io/collector/pdata/internal/proto):
// a known field with another wire type is an error, an unknown one is skipped, a message's fields
// are checked against its Schema. collector/span's trace and log decoders read OTLP with it
// and answer malformed input exactly as pdata does (FuzzDecodeProtoMatchesPdata).
package otlpwire

import (
	"errors"
	"fmt"
	"io"
)

// The errors of pdata's decoder, with its words.
var (
	ErrIntOverflow    = errors.New("proto: integer overflow")
	ErrInvalidLength  = errors.New("proto: negative length found during unmarshaling")
	ErrRecursionDepth = errors.New("proto: exceeded max recursion depth")
	ErrEndOfGroup     = errors.New("proto: unexpected end of group")
)

// RecursionLimit is pdata's bound on attribute value nesting.
const RecursionLimit = 100

// Wire types.
const (
	WTVarint     = 0
	WTI64        = 1
	WTLen        = 2
	WTStartGroup = 3
	WTEndGroup   = 4
	WTI32        = 5
)

func ConsumeVarint(b []byte, pos int) (uint64, int, error) {
	var num uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, ErrIntOverflow
		}
		if pos >= len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		c := b[pos]
		pos++
		num |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return num, pos, nil
		}
	}
}

func ConsumeTag(b []byte, pos int) (int32, int8, int, error) {
	tag, pos, err := ConsumeVarint(b, pos)
	if err != nil {
		return 0, 0, 0, err
	}
	num := int32(tag >> 3)
	if num <= 0 {
		return 0, 0, 0, fmt.Errorf("proto: illegal field=%d (tag=%d, pos=%d)", num, tag, pos)
	}
	return num, int8(tag & 7), pos, nil
}

func ConsumeLen(b []byte, pos int) (int, int, error) {
	num, pos, err := ConsumeVarint(b, pos)
	if err != nil {
		return 0, 0, err
	}
	n := int(num)
	if n < 0 {
		return 0, 0, ErrInvalidLength
	}
	pos += n
	if pos < 0 || pos > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return n, pos, nil
}

func ConsumeFixed(b []byte, pos, n int) (uint64, int, error) {
	pos += n
	if pos < 0 || pos > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[pos-n+i])
	}
	return v, pos, nil
}

// ConsumeUnknown skips an unknown field exactly as pdata's proto.ConsumeUnknown does.
func ConsumeUnknown(b []byte, pos int, wt int8) (int, error) {
	var err error
	depth := 0
	for pos < len(b) {
		switch wt {
		case WTVarint:
			_, pos, err = ConsumeVarint(b, pos)
			return pos, err
		case WTI64:
			_, pos, err = ConsumeFixed(b, pos, 8)
			return pos, err
		case WTLen:
			_, pos, err = ConsumeLen(b, pos)
			return pos, err
		case WTStartGroup:
			depth++
		case WTEndGroup:
			if depth == 0 {
				return 0, ErrEndOfGroup
			}
			depth--
		case WTI32:
			_, pos, err = ConsumeFixed(b, pos, 4)
			return pos, err
		default:
			return 0, fmt.Errorf("proto: illegal wireType %d", wt)
		}
		if depth == 0 {
			return pos, nil
		}
		if _, wt, pos, err = ConsumeTag(b, pos); err != nil {
			return 0, err
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// Schema lists a message's known fields: their wire types (-1: not a field of the message)
// and names (for the error pdata gives of a wrong wire type).
type Schema struct {
	wt       [17]int8
	names    [17]string
	field1kL bool // field 1000 is a length-delimited field (ResourceSpans' deprecated scope spans)
}

func NewSchema(fields ...any) *Schema {
	s := &Schema{}
	for i := range s.wt {
		s.wt[i] = -1
	}
	for i := 0; i < len(fields); i += 3 {
		n := fields[i].(int)
		if n == 1000 {
			s.field1kL = true
			continue
		}
		s.wt[n] = int8(fields[i+1].(int))
		s.names[n] = fields[i+2].(string)
	}
	return s
}

// Field is one field read: Num is 0 for a field the message does not know (skipped).
type Field struct {
	Num int32
	N   uint64 // a varint's or fixed field's value
	B   []byte // a length-delimited field's bytes
}

// ReadField reads the field at pos of a message of schema s and returns the position after it.
//
// Most fields of a span are known fields with a one-byte tag and, when length-delimited, a
// length of one or two bytes: those are read here; anything else, valid or not, by
// readFieldSlow from the same position, so that errors and unknown fields are handled in one
// place.
func ReadField(b []byte, pos int, s *Schema) (Field, int, error) {
	if pos+1 < len(b) && b[pos] < 0x80 {
		c := b[pos]
		num, wt := int32(c>>3), int8(c&7)
		if num > 0 && num < int32(len(s.wt)) && s.wt[num] == wt {
			p := pos + 1
			switch wt {
			case WTLen:
				n := int(b[p])
				p++
				if n >= 0x80 {
					if p >= len(b) || b[p] >= 0x80 {
						break // three bytes or more, or cut short
					}
					n = n&0x7f | int(b[p])<<7
					p++
				}
				if n <= len(b)-p {
					return Field{Num: num, B: b[p : p+n]}, p + n, nil
				}
			case WTVarint:
				if v := b[p]; v < 0x80 {
					return Field{Num: num, N: uint64(v)}, p + 1, nil
				}
			}
		}
	}
	return readFieldSlow(b, pos, s)
}

// readFieldSlow is ReadField for any field.
func readFieldSlow(b []byte, pos int, s *Schema) (Field, int, error) {
	num, wt, pos, err := ConsumeTag(b, pos)
	if err != nil {
		return Field{}, 0, err
	}
	want := int8(-1)
	switch {
	case num < int32(len(s.wt)):
		want = s.wt[num]
	case num == 1000 && s.field1kL:
		want = WTLen
	}
	if want < 0 {
		pos, err = ConsumeUnknown(b, pos, wt)
		return Field{}, pos, err
	}
	if wt != want {
		name := "DeprecatedScopeSpans"
		if num < int32(len(s.names)) {
			name = s.names[num]
		}
		return Field{}, 0, fmt.Errorf("proto: wrong wireType = %d for field %s", wt, name)
	}
	f := Field{Num: num}
	switch wt {
	case WTVarint:
		f.N, pos, err = ConsumeVarint(b, pos)
	case WTI64:
		f.N, pos, err = ConsumeFixed(b, pos, 8)
	case WTI32:
		f.N, pos, err = ConsumeFixed(b, pos, 4)
	case WTLen:
		var n int
		n, pos, err = ConsumeLen(b, pos)
		if err == nil {
			f.B = b[pos-n : pos]
		}
	}
	return f, pos, err
}

// Validate checks a message none of whose fields are read (Status, EntityRef).
func Validate(b []byte, s *Schema) error {
	for pos := 0; pos < len(b); {
		var err error
		if _, pos, err = ReadField(b, pos, s); err != nil {
			return err
		}
	}
	return nil
}
