// Package fielderr is the error of a settings value: the key it is about, relative to the
// struct whose Validate reported it, and what is wrong. The config walk (config.Parse) makes the
// key absolute and adds its line, so a settings type that lives with the code using it
// (natsconn.Config, tlsauth.TLSServer) reports problems the way the config's own sections do.
package fielderr

import "fmt"

// Error is a problem with one key. Key is relative to the struct that reported it until the
// config walk makes it absolute; Line is 0 until the walk finds it.
type Error struct {
	Key  string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: `%s` %s", e.Line, e.Key, e.Msg)
	}
	return fmt.Sprintf("`%s` %s", e.Key, e.Msg)
}

// Invalid reports a problem with the key (relative to the validating struct).
func Invalid(key, format string, args ...any) error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}
