package assemble

import "github.com/ragwatch/ragwatch/collector/conventions"

// keyBytes is the heap a held attribute's key keeps: nothing for a shared key (the decoders
// hold the conventions' shared copies of well-known keys).
func keyBytes(k string) int64 {
	if conventions.IsShared(k) {
		return 0
	}
	return strBytes(k)
}
