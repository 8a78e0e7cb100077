package offheap

import "strings"

// Strings interns strings under small ids (1, 2, …; 0 stands for ""), counting references, so
// that a Table's entries name a string by its id rather than hold a pointer: one copy of each
// string, dropped with its last reference, its id reused after. The strings themselves live on
// the Go heap.
//
// Strings is not safe for concurrent use. The zero value is empty and ready.
type Strings struct {
	names  []string // by id - 1
	refs   []int    // by id - 1
	byName map[string]uint32
	free   []uint32
	last   uint32 // the id last referenced: callers mostly repeat a string
}

// Ref returns the id of s, adding a reference (none for "": id 0).
func (x *Strings) Ref(s string) uint32 {
	if s == "" {
		return 0
	}
	id := x.last
	if id == 0 || x.names[id-1] != s {
		id = x.byName[s]
		if id == 0 {
			s = strings.Clone(s) // not a slice of a larger buffer the caller may hold
			if n := len(x.free); n > 0 {
				id = x.free[n-1]
				x.free = x.free[:n-1]
				x.names[id-1] = s
			} else {
				x.names = append(x.names, s)
				x.refs = append(x.refs, 0)
				id = uint32(len(x.names))
			}
			if x.byName == nil {
				x.byName = map[string]uint32{}
			}
			x.byName[s] = id
		}
		x.last = id
	}
	x.refs[id-1]++
	return id
}

// Unref drops a reference to id; the string goes with its last one.
func (x *Strings) Unref(id uint32) {
	if id == 0 {
		return
	}
	if x.refs[id-1]--; x.refs[id-1] > 0 {
		return
	}
	delete(x.byName, x.names[id-1])
	x.names[id-1] = ""
	x.free = append(x.free, id)
	if x.last == id {
		x.last = 0
	}
}

// Name returns the string of id.
func (x *Strings) Name(id uint32) string {
	if id == 0 {
		return ""
	}
	return x.names[id-1]
}

// Len is the number of strings held.
func (x *Strings) Len() int { return len(x.byName) }
