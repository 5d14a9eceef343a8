package agentcfg

import (
	"os"
	"os/user"
	"path/filepath"
)

// SameLibrary reports whether two paths name one library: the same string, or
// one file reached through links, as the loader would open it once for both
// (NVTX_INJECTION64_PATH naming the agent that CUDA_INJECTION64_PATH names).
func SameLibrary(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// TritonCacheDir is where Triton keeps its compiled kernels, each as NAME.cubin beside NAME.ptx
// in a folder of its own: TRITON_CACHE_DIR, else ~/.triton/cache ("" when there is no home).
// The agent finds Triton kernels' PTX there (race, probes, write sets); doctor reports on it.
func TritonCacheDir() string {
	if dir := os.Getenv("TRITON_CACHE_DIR"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".triton", "cache")
}

// TritonCacheDirs are the folders Triton's compiled kernels may be in as a program runs:
// TritonCacheDir, and the per-device caches torch.compile (Inductor) points Triton at,
// TORCHINDUCTOR_CACHE_DIR (else TMPDIR's torchinductor_USER)/triton/DEVICE, which Inductor
// sets inside the process, where the agent does not see it. Listed anew at each call: a
// device's folder appears when Inductor first compiles for it.
func TritonCacheDirs() []string {
	var dirs []string
	d := TritonCacheDir()
	if d != "" {
		dirs = append(dirs, d)
	}
	for _, i := range InductorTritonCacheDirs() {
		if i != d {
			dirs = append(dirs, i)
		}
	}
	return dirs
}

// InductorTritonCacheDirs are the per-device Triton caches of torch.compile (Inductor) that
// exist now: TORCHINDUCTOR_CACHE_DIR (else TMPDIR's torchinductor_USER)/triton/DEVICE.
func InductorTritonCacheDirs() []string {
	var dirs []string
	base := os.Getenv("TORCHINDUCTOR_CACHE_DIR")
	if base == "" {
		name := os.Getenv("USER")
		if name == "" {
			if u, err := user.Current(); err == nil {
				name = u.Username
			}
		}
		base = filepath.Join(os.TempDir(), "torchinductor_"+name)
	}
	devices, _ := filepath.Glob(filepath.Join(base, "triton", "*"))
	for _, d := range devices {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
