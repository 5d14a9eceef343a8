package agent

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/gpurr/gpurr/internal/fatbin"
)

// hostFatbins finds the PTX of a kernel the program launches through the CUDA runtime
// (<<<>>>, cudaLaunchKernel). The runtime registers the fat binary nvcc put in the program's
// executable or library (its .nv_fatbin section) and loads the module through cuLibraryLoadData
// or lazily: CUPTI hands the agent the cubin the driver chose, which holds no PTX. The fat
// binary still does, when the program was built with a compute_NN target: this reads the
// .nv_fatbin sections of the ELF files the process has mapped, and indexes the kernels their
// PTX entries declare.
//
// Files are read once, on the first kernel asked for and again only for files mapped since;
// the PTX read is bounded (hostPTXBudget): NVIDIA's own libraries hold gigabytes of cubins and
// little PTX, but a process may map many.
type hostFatbins struct {
	mu      sync.Mutex
	read    map[string]bool         // files read (or skipped)
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
		if h.read[f] || h.full {
			continue
		}
		h.read[f] = true
		h.readFile(f)
	}
}

func (h *hostFatbins) readFile(path string) {
	f, err := elf.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	s := f.Section(".nv_fatbin")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return
	}
	data, err := s.Data()
	if err != nil {
		return
	}
	h.index(data)
}

// index notes the kernels of the PTX entries of a .nv_fatbin section's containers.
func (h *hostFatbins) index(section []byte) {
	es, err := fatbin.Parse(section)
	if err != nil {
		return
	}
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
