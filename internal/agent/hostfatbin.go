package agent

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gpurr/gpurr/internal/fatbin"
	"github.com/gpurr/gpurr/internal/kernels"
)

// hostFatbins finds the PTX of a kernel the program launches through the CUDA runtime
// (<<<>>>, cudaLaunchKernel). The runtime registers the fat binary nvcc put in the program's
// executable or library (its .nv_fatbin section) and loads the module through cuLibraryLoadData
// or lazily: CUPTI hands the agent the cubin the driver chose, which holds no PTX. The fat
// binary still does, when the program was built with a compute_NN target: this reads the
// .nv_fatbin sections of the ELF files the process has mapped, and indexes the kernels their
// PTX entries declare.
//
// Files are read once, on the first module or kernel asked for and again only for files mapped
// since, each where it is mapped (only the pages read are). A module's PTX is found by its
// cubin (forCubin: the container holding an ELF entry of the same bytes), which reads entry
// headers only; a kernel's by its name (ptx), which decompresses PTX, bounded by
// hostPTXBudget: PyTorch's libraries alone hold hundreds of MiB of it.
type hostFatbins struct {
	mu      sync.Mutex
	read    map[string]bool         // files read (or skipped)
	entries [][]fatbin.Entry        // each file's fat binary entries, read where they are mapped
	files   []string                // and the files, in the same order
	indexed int                     // how many of entries' files kernels indexes
	kernels map[string][]fatbin.PTX // kernel name → the PTX entries that declare it
	spent   int64                   // PTX bytes decompressed
	full    bool                    // the budget ran out: some files were not read
}

// hostPTXBudget is how many bytes of PTX the search decompresses in all.
const hostPTXBudget = 512 << 20

var programFatbins = &hostFatbins{read: map[string]bool{}, kernels: map[string][]fatbin.PTX{}}

// ptx returns the PTX that declares kernel, of the newest architecture among the process's
// fat binaries; an error saying why when none does.
func (h *hostFatbins) ptx(kernel string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.kernels[kernel]; !ok {
		h.scan(mappedFiles("/proc/self/maps"))
		h.indexNew()
	}
	return h.ptxOf(kernel)
}

// ptxOf is ptx on the files read so far; h.mu is held.
func (h *hostFatbins) ptxOf(kernel string) ([]byte, error) {
	entries := h.kernels[kernel]
	if len(entries) == 0 {
		if h.full {
			return nil, fmt.Errorf("no PTX: the program's fat binaries held none declaring it in their first %d MiB of PTX", hostPTXBudget>>20)
		}
		return nil, fmt.Errorf("no PTX: the program's fat binaries hold none declaring it (build with a compute_NN target, e.g. -gencode arch=compute_90,code=compute_90)")
	}
	p, _ := fatbin.Pick(entries, 0)
	return p.Text, nil
}

// scan reads the files not read yet.
func (h *hostFatbins) scan(files []string) {
	for _, f := range files {
		if h.read[f] {
			continue
		}
		h.read[f] = true
		h.readFile(f)
	}
}

// readFile maps a file's .nv_fatbin section (a library's may be gigabytes of cubins: only the
// pages read are), and indexes its PTX.
func (h *hostFatbins) readFile(path string) {
	// Only regular files: a process maps device files too (/dev/nvidia*), which are not
	// for the agent to open.
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return
	}
	f, err := elf.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	s := f.Section(".nv_fatbin")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size == 0 || s.Size > 1<<40 {
		return
	}
	data, err := mapSection(path, s.Offset, s.Size)
	if err != nil {
		return
	}
	es, err := fatbin.Parse(data)
	if err != nil {
		return
	}
	h.entries = append(h.entries, es)
	h.files = append(h.files, path)
}

// indexNew indexes the PTX of the files read since it last ran, within the budget.
func (h *hostFatbins) indexNew() {
	for ; h.indexed < len(h.entries) && !h.full; h.indexed++ {
		h.index(h.entries[h.indexed])
	}
}

// mapSection maps size bytes of the file at offset, read-only; the mapping stays for the
// process's life (the index points into it).
func mapSection(path string, offset, size uint64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	page := uint64(os.Getpagesize())
	start := offset &^ (page - 1)
	b, err := unix.Mmap(int(f.Fd()), int64(start), int(offset-start+size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	return b[offset-start:], nil
}

// forCubin returns the PTX compiled with cubin: the newest PTX entry of the container that
// holds an ELF entry of exactly cubin's bytes (the module the driver chose out of a fat
// binary), nil when no mapped file's does. Only entries of cubin's size are decompressed.
func (h *hostFatbins) forCubin(cubin []byte) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scan(mappedFiles("/proc/self/maps"))
	for _, es := range h.entries {
		for i := range es {
			e := &es[i]
			if e.Kind != fatbin.KindELF || e.Size != uint64(len(cubin)) {
				continue
			}
			if d, err := e.Data(); err != nil || !bytes.Equal(d, cubin) {
				continue
			}
			var best []byte
			arch := -1
			for j := range es {
				if p := &es[j]; p.Container == e.Container && p.Kind == fatbin.KindPTX && p.Arch > arch {
					if text, err := p.Data(); err == nil {
						best, arch = bytes.TrimRight(text, "\x00"), p.Arch
					}
				}
			}
			if best != nil {
				return bytes.Clone(best)
			}
		}
	}
	return nil
}

// forNames returns the newest PTX entry of file's fat binary that declares every one of names,
// nil when none does: for a module the driver compiled from PTX (no cubin of the fat binary
// matches it), looked for in the program's own executable only, whose PTX is small.
func (h *hostFatbins) forNames(file string, names []string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scan(mappedFiles("/proc/self/maps"))
	var best []byte
	arch := -1
	for i, es := range h.entries {
		if h.files[i] != file {
			continue
		}
		for j := range es {
			e := &es[j]
			if e.Kind != fatbin.KindPTX || e.Arch <= arch || e.Size > hostPTXBudget {
				continue
			}
			text, err := e.Data()
			if err != nil {
				continue
			}
			declared := map[string]bool{}
			for _, k := range fatbin.Kernels(text) {
				declared[k] = true
			}
			all := len(names) > 0
			for _, n := range names {
				all = all && declared[n]
			}
			if all {
				best, arch = bytes.TrimRight(text, "\x00"), e.Arch
			}
		}
	}
	return bytes.Clone(best)
}

// programPTX is the PTX of a module the program loaded, and where it came from (Module.ptx):
// gpurr demo's own module (its kernels are gpurr's, loaded from PTX text), else from the
// program's fat binaries: the container of its cubin, else the executable's PTX that declares
// its kernels.
func programPTX(cubin []byte, names []string) ([]byte, string) {
	if isDemoModule(names) {
		return kernels.DemoPTX(), "gpurr-demo"
	}
	if p := programFatbins.forCubin(cubin); p != nil {
		return p, "fatbin"
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, ""
	}
	return programFatbins.forNames(exe, names), "fatbin"
}

// isDemoModule says whether a module's functions are those of gpurr's demo PTX, all of them.
func isDemoModule(names []string) bool {
	demo := fatbin.Kernels(kernels.DemoPTX())
	if len(names) != len(demo) {
		return false
	}
	for _, n := range names {
		if !slices.Contains(demo, n) {
			return false
		}
	}
	return true
}

// index notes the kernels of the PTX entries of a .nv_fatbin section's containers.
func (h *hostFatbins) index(es []fatbin.Entry) {
	for i := range es {
		e := &es[i]
		if e.Kind != fatbin.KindPTX {
			continue
		}
		if h.spent+int64(e.Size) > hostPTXBudget {
			h.full = true
			return
		}
		h.spent += int64(e.Size)
		text, err := e.Data()
		if err != nil {
			continue
		}
		p := fatbin.PTX{Arch: e.Arch, Text: bytes.TrimRight(text, "\x00")}
		for _, k := range fatbin.Kernels(p.Text) {
			h.kernels[k] = append(h.kernels[k], p)
		}
	}
}

// mappedFiles lists the files a maps file (/proc/PID/maps) names, once each, in order.
func mappedFiles(maps string) []string {
	f, err := os.Open(maps)
	if err != nil {
		return nil
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") || seen[fields[5]] {
			continue
		}
		seen[fields[5]] = true
		out = append(out, fields[5])
	}
	return out
}
