package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpurr/gpurr/internal/agentcfg"
)

// tritonCache finds the PTX a Triton kernel was compiled from. Triton keeps each compiled
// kernel in a folder of its cache (TRITON_CACHE_DIR, else ~/.triton/cache) as NAME.cubin beside
// NAME.ptx; the module the driver loads is that cubin, byte for byte. So a module whose SHA-256
// is a cached cubin's has that folder's PTX, which race hunting and probes instrument.
//
// The writer asks once per module; only folders of a function name the module defines are
// read, and a folder is listed once (Triton writes a folder whole, then renames it in).
type tritonCache struct {
	listed map[string]time.Time // each root folder's modification time at its last listing
	seen   map[string]bool      // cache folders listed
	byName map[string][]string  // NAME.cubin → the folders that hold one
}

func newTritonCache() *tritonCache {
	return &tritonCache{listed: map[string]time.Time{}, seen: map[string]bool{}, byName: map[string][]string{}}
}

// programTriton is the Triton cache the program's threads look in as modules load (probes,
// write sets); the writer goroutine has its own.
var programTriton struct {
	sync.Mutex
	c *tritonCache
}

// programTritonPTX is tritonCache.ptx on programTriton; holdsAny the same for holdsAny.
func programTritonPTX(digest string, names []string) []byte {
	programTriton.Lock()
	defer programTriton.Unlock()
	if programTriton.c == nil {
		programTriton.c = newTritonCache()
	}
	return programTriton.c.ptx(digest, names)
}

func programTritonHoldsAny() bool {
	programTriton.Lock()
	defer programTriton.Unlock()
	if programTriton.c == nil {
		programTriton.c = newTritonCache()
	}
	return programTriton.c.holdsAny()
}

// ptx returns the PTX of the cached cubin whose SHA-256 is digest, for a module defining
// names; nil when the cache holds none.
func (c *tritonCache) ptx(digest string, names []string) []byte {
	if c == nil || len(names) == 0 {
		return nil
	}
	if p := c.find(digest, names); p != nil {
		return p
	}
	if !c.refresh() { // the kernel may have been compiled since the last listing
		return nil
	}
	return c.find(digest, names)
}

func (c *tritonCache) find(digest string, names []string) []byte {
	want, err := hex.DecodeString(digest)
	if err != nil {
		return nil
	}
	for _, name := range names {
		for _, dir := range c.byName[name] {
			cubin, err := os.ReadFile(filepath.Join(dir, name+".cubin"))
			if err != nil {
				continue
			}
			if sum := sha256.Sum256(cubin); !bytes.Equal(sum[:], want) {
				continue
			}
			if ptx, err := os.ReadFile(filepath.Join(dir, name+".ptx")); err == nil {
				return ptx
			}
		}
	}
	return nil
}

// holdsAny reports whether the cache folders hold any compiled kernel, listing new ones first.
func (c *tritonCache) holdsAny() bool {
	if c == nil {
		return false
	}
	c.refresh()
	return len(c.byName) > 0
}

// refresh lists the cache folders not seen yet, in every root (agentcfg.TritonCacheDirs);
// false when there were none. A root folder whose modification time has not moved has no new
// folder: most modules (cuBLAS, PyTorch's own) cost a stat per root.
func (c *tritonCache) refresh() bool {
	added := false
	for _, root := range agentcfg.TritonCacheDirs() {
		if c.refreshRoot(root) {
			added = true
		}
	}
	return added
}

func (c *tritonCache) refreshRoot(root string) bool {
	st, err := os.Stat(root)
	if err != nil || st.ModTime().Equal(c.listed[root]) {
		return false
	}
	c.listed[root] = st.ModTime()
	entries, err := os.ReadDir(root)
	if err != nil {
		return false
	}
	added := false
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || c.seen[dir] {
			continue
		}
		c.seen[dir], added = true, true
		files, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, f := range files {
			if name, ok := strings.CutSuffix(f.Name(), ".cubin"); ok && name != "" {
				c.byName[name] = append(c.byName[name], dir)
			}
		}
	}
	return added
}
