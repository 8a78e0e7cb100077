//go:build unix

package offheap

import "syscall"

// mapAnon maps size bytes of private anonymous memory. MAP_NORESERVE: the kernel commits a page
// only when it is first written, so a bound reserved up front costs nothing until it is used.
func mapAnon(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|mapNoReserve)
}

func unmapAnon(mem []byte) error { return syscall.Munmap(mem) }
