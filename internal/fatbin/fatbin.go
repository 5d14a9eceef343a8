// Package fatbin reads NVIDIA fat binaries: the containers nvcc puts device code in (a host
// object's .nv_fatbin section, a .fatbin file, what cuModuleLoadFatBinary takes), each holding
// entries of PTX text and cubins (ELF) for several architectures, compressed or not. gpurr
// reads them for PTX to instrument (race hunting, probes).
//
// The layout, as documented by the open-source tools that read it (no NVIDIA header describes
// it): a container is a 16-byte header (magic 0xBA55ED50, version u16 = 1, header size u16 =
// 16, then the size u64 of what follows it), then entries, each an entry header followed by its
// payload. An entry header starts: kind u16 (1 PTX, 2 ELF), u16, header size u32, payload
// size u64 (padded), compressed size u32, u32, minor u16, major u16 (the PTX ISA version of
// a PTX entry), arch u32 (sm_NN as NN), name offset u32, name length u32, flags u64, u64,
// uncompressed size u64: 64 bytes, more in newer toolkits (the header size says). Flags 0x2000
// mark an LZ4 block payload, 0x8000 a zstd frame. Containers follow one another in a section,
// zero bytes of alignment between them.
//
// The parser was built against this description and hand-assembled containers
// (testdata/gen.go); a real nvcc fatbin is read on the GPU machine by gputest.
package fatbin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Magic starts a container.
const Magic = 0xBA55ED50

// Entry kinds.
const (
	KindPTX = 1
	KindELF = 2
)

// Flags of an entry.
const (
	FlagLZ4  = 0x2000
	FlagZstd = 0x8000
)

const (
	headerBytes      = 16
	entryHeaderBytes = 64
	// maxPayload bounds what an entry may claim to decompress to: a kernel's PTX is rarely more
	// than tens of MiB; a corrupt size must not allocate gigabytes.
	maxPayload = 1 << 30
	// maxPadding is the most zero bytes read past between containers (a section aligns them).
	maxPadding = 256
)

// ErrNoPTX says a fat binary holds no PTX entry.
var ErrNoPTX = errors.New("no PTX in the fat binary")

// Entry is one entry of a container.
type Entry struct {
	Kind  uint16 // KindPTX, KindELF
	Arch  int    // sm_NN as NN
	Flags uint64
	Size  uint64 // uncompressed size (the payload's size when not compressed)
	// Container is the ordinal of the container holding the entry, from 0: the entries of
	// one container are one compilation's code (a cubin and the PTX it came from).
	Container int

	payload []byte // as stored: compressed or not
}

// Compressed says whether the payload is stored compressed.
func (e *Entry) Compressed() bool { return e.Flags&(FlagLZ4|FlagZstd) != 0 }

// Data returns the entry's bytes, decompressed.
func (e *Entry) Data() ([]byte, error) {
	switch {
	case e.Flags&FlagZstd != 0:
		if e.Size > maxPayload {
			return nil, fmt.Errorf("fatbin: a zstd entry of %d bytes uncompressed: too large", e.Size)
		}
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxPayload))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		out, err := d.DecodeAll(e.payload, make([]byte, 0, e.Size))
		if err != nil {
			return nil, fmt.Errorf("fatbin: zstd entry: %w", err)
		}
		return out, nil
	case e.Flags&FlagLZ4 != 0:
		if e.Size > maxPayload || e.Size == 0 {
			return nil, fmt.Errorf("fatbin: an LZ4 entry of %d bytes uncompressed: want 1 byte to 1 GiB", e.Size)
		}
		out := make([]byte, e.Size)
		n, err := lz4.UncompressBlock(e.payload, out)
		if err != nil {
			return nil, fmt.Errorf("fatbin: LZ4 entry: %w", err)
		}
		return out[:n], nil
	}
	return e.payload, nil
}

// Parse reads the containers at the start of b, one after another (a .nv_fatbin section holds
// several; a .fatbin file one), and returns their entries in order. It fails on bytes that
// start with no container, or a container that runs past b.
func Parse(b []byte) ([]Entry, error) {
	var out []Entry
	off := 0
	for n := 0; ; n++ {
		for pad := 0; off < len(b) && b[off] == 0 && pad < maxPadding; pad++ { // between containers
			off++
		}
		if len(b)-off < headerBytes || binary.LittleEndian.Uint32(b[off:]) != Magic {
			if n == 0 {
				return nil, fmt.Errorf("not a fat binary: no magic 0x%X at its start", Magic)
			}
			return out, nil
		}
		hsize := int(binary.LittleEndian.Uint16(b[off+6:]))
		size := binary.LittleEndian.Uint64(b[off+8:])
		if hsize < headerBytes || hsize > len(b)-off || uint64(len(b)-off-hsize) < size {
			return nil, fmt.Errorf("fatbin: container %d at byte %d runs past the end (%d bytes say its header, %d bytes of entries, of %d)",
				n+1, off, hsize, size, len(b)-off)
		}
		body := b[off+hsize : off+hsize+int(size)]
		es, err := entries(body)
		if err != nil {
			return nil, fmt.Errorf("fatbin: container %d at byte %d: %w", n+1, off, err)
		}
		for i := range es {
			es[i].Container = n
		}
		out = append(out, es...)
		off += hsize + int(size)
	}
}

func entries(body []byte) ([]Entry, error) {
	var out []Entry
	for off := 0; off < len(body); {
		if len(body)-off < entryHeaderBytes {
			return nil, fmt.Errorf("entry at byte %d: %d bytes left, fewer than an entry header", off, len(body)-off)
		}
		h := body[off:]
		hsize := uint64(binary.LittleEndian.Uint32(h[4:]))
		psize := binary.LittleEndian.Uint64(h[8:])
		csize := uint64(binary.LittleEndian.Uint32(h[16:]))
		left := uint64(len(body) - off)
		if hsize < entryHeaderBytes || hsize > left || psize > left-hsize {
			return nil, fmt.Errorf("entry at byte %d: header %d and payload %d bytes run past the container's %d", off, hsize, psize, left)
		}
		e := Entry{
			Kind:  binary.LittleEndian.Uint16(h[0:]),
			Arch:  int(binary.LittleEndian.Uint32(h[28:])),
			Flags: binary.LittleEndian.Uint64(h[40:]),
			Size:  binary.LittleEndian.Uint64(h[56:]),
		}
		p := body[off+int(hsize) : off+int(hsize+psize)]
		if e.Compressed() {
			if csize > psize {
				return nil, fmt.Errorf("entry at byte %d: %d compressed bytes in a payload of %d", off, csize, psize)
			}
			if csize > 0 {
				p = p[:csize]
			}
		} else {
			// The payload is padded to 8 bytes; the stored size says where its bytes end.
			if csize > 0 && csize <= psize {
				p = p[:csize]
			} else if e.Size > 0 && e.Size <= psize {
				p = p[:e.Size]
			}
			e.Size = uint64(len(p))
		}
		e.payload = p
		out = append(out, e)
		off += int(hsize + psize)
	}
	return out, nil
}

// PTX is a PTX entry's text, without the NUL padding that ends it.
type PTX struct {
	Arch int // the entry's sm_NN, as NN
	Text []byte
}

// PTXs returns the text of every PTX entry of b, in order; ErrNoPTX when there is none.
func PTXs(b []byte) ([]PTX, error) {
	es, err := Parse(b)
	if err != nil {
		return nil, err
	}
	var out []PTX
	for i := range es {
		if es[i].Kind != KindPTX {
			continue
		}
		d, err := es[i].Data()
		if err != nil {
			return nil, err
		}
		out = append(out, PTX{Arch: es[i].Arch, Text: bytes.TrimRight(d, "\x00")})
	}
	if len(out) == 0 {
		return nil, ErrNoPTX
	}
	return out, nil
}

var entryName = regexp.MustCompile(`\.entry\s+([A-Za-z_$%][\w$]*)`)

// Kernels lists the kernels (.entry) a PTX text declares.
func Kernels(ptx []byte) []string {
	var out []string
	for _, m := range entryName.FindAllSubmatch(ptx, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// Pick chooses, of PTX entries, the one to run on a GPU of sm_NN (gpu; 0 when not known):
// the newest architecture at most gpu's. It fails with a *NewerError when every entry is for
// a newer one than gpu.
func Pick(ptxs []PTX, gpu int) (PTX, error) {
	best := -1
	for i, p := range ptxs {
		if (gpu == 0 || p.Arch <= gpu) && (best < 0 || p.Arch > ptxs[best].Arch) {
			best = i
		}
	}
	if best < 0 {
		oldest := ptxs[0].Arch
		for _, p := range ptxs {
			oldest = min(oldest, p.Arch)
		}
		return PTX{}, &NewerError{Oldest: oldest, GPU: gpu}
	}
	return ptxs[best], nil
}

// NewerError says every PTX entry Pick was given targets a newer architecture than the GPU's:
// the driver cannot compile it for that GPU.
type NewerError struct {
	Oldest int // the oldest entry's sm_NN, as NN
	GPU    int // the GPU's
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("the fat binary's PTX is for sm_%d and newer, the GPU is sm_%d: rebuild with an older compute_NN, or pass --ptx", e.Oldest, e.GPU)
}
