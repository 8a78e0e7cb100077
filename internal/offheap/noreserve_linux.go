package offheap

import "syscall"

const mapNoReserve = syscall.MAP_NORESERVE
