package recording

// KernelIdentity is Kernel.identity, the name of a kernel that is the same
// in every run that loads the same code: FNV-1a 64 over the module's
// SHA-256 (lower-case hex, as Module.sha256), a 0xFF byte and the kernel's
// mangled name. moduleSHA256 is "" for a kernel whose module the recording
// does not hold. The agent computes it for every kernel it records; diff,
// manifest and verify match launches across runs by it.
func KernelIdentity(moduleSHA256, name string) uint64 {
	const offset, prime = 0xcbf29ce484222325, 0x100000001b3
	h := uint64(offset)
	for i := 0; i < len(moduleSHA256); i++ {
		h = (h ^ uint64(moduleSHA256[i])) * prime
	}
	h = (h ^ 0xff) * prime
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * prime
	}
	return h
}
