package offheap

// The Go heap's side of memory accounting: what an allocation on the heap really takes, for
// bounds that count held bytes (assembly.max_bytes). The Go allocator rounds each small object
// up to its size class, and adds an 8-byte header to pointerful objects over 512 bytes; large
// objects take whole 8 KiB pages. TestAllocBytesIsTheSizeClass checks the lookup against the
// classes; collector/assemble's TestHeldBytesMatchHeap checks a total against the heap itself.

// sizeClasses are the Go allocator's small size classes (internal/runtime/gc).
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
	240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912,
	8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576,
	27264, 28672, 32768}

// classOf8 and classOf128 map a size to its class as the runtime does: by 8-byte steps up to
// 1024 bytes, by 128-byte steps above.
var classOf8, classOf128 = func() (c8 [1024/8 + 1]uint8, c128 [(32768-1024)/128 + 1]uint8) {
	c := 0
	for i := range c8 {
		for sizeClasses[c] < int64(i*8) {
			c++
		}
		c8[i] = uint8(c)
	}
	for i := range c128 {
		for sizeClasses[c] < int64(1024+i*128) {
			c++
		}
		c128[i] = uint8(c)
	}
	return c8, c128
}()

// AllocBytes is the heap an allocation of n bytes takes; pointers: the object holds pointers.
func AllocBytes(n int64, pointers bool) int64 {
	if n <= 0 {
		return 0
	}
	if pointers && n > 512 {
		n += 8 // malloc header
	}
	switch {
	case n <= 1024:
		return sizeClasses[classOf8[(n+7)/8]]
	case n <= 32768:
		return sizeClasses[classOf128[(n-1024+127)/128]]
	}
	return (n + 8191) &^ 8191
}

// StringBytes is the heap a string of its own allocation takes. Strings under 16 bytes share
// the allocator's 16-byte tiny blocks; one held keeps its whole block.
func StringBytes(s string) int64 {
	switch n := int64(len(s)); {
	case n == 0:
		return 0
	case n < 16:
		return 16
	default:
		return AllocBytes(n, false)
	}
}
