//go:build unix && !linux

package offheap

const mapNoReserve = 0 // pages are committed lazily anyway; MAP_NORESERVE is Linux's word for it
