package recording

import (
	"strings"

	"github.com/ianlancetaylor/demangle"
)

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

// Demangle returns the readable form of a mangled C++ name, as the
// recording stores it (Kernel.demangled, a native frame's function, a C++
// autograd node's class) and as readers show names the recording holds
// mangled (KernelActivity.name). Only Itanium C++ names, which start with
// "_Z", are demangled; others (Triton's and cuBLAS's kernels, C functions)
// come back as they are, and so does a name that is not wholly a mangled
// name. Clone suffixes (".constprop.0", ".cold") are left out, so a
// function and its compiler-made clones read as one name.
func Demangle(name string) string {
	if !strings.HasPrefix(name, "_Z") {
		return name
	}
	// With its default options the demangler accepts a name only when
	// nothing but clone suffixes follows the mangled part; with NoClones it
	// would take any tail, but it prints the name without the suffixes.
	if _, err := demangle.ToString(name); err != nil {
		return name
	}
	return demangle.Filter(name, demangle.NoClones)
}
