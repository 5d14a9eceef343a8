// Package cubin reads cubins, the ELF images of NVIDIA GPU code that a
// recording stores in its modules/ folder (docs/format.md, "Modules"). It
// reads what the format needs of them: the functions an image defines
// (Module.kernel_names, from which the agent finds each kernel's module and
// so its identity) and, for messages, the GPU architecture it was built
// for. Images come from the recorded program and from recordings: Parse and
// Functions fail with an error, never a panic, on any bytes.
package cubin

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MachineCUDA is the ELF machine of a cubin (EM_CUDA).
const MachineCUDA elf.Machine = 190

// headerBytes is how much of the ELF64 header Parse reads: up to and
// including e_flags.
const headerBytes = 52

// File is a parsed image: its ELF header, read as cubins are laid out
// (64-bit, little-endian), whatever machine it names.
type File struct {
	Machine    elf.Machine // MachineCUDA for a cubin
	ABIVersion uint8       // e_ident[EI_ABIVERSION]
	Flags      uint32      // e_flags, where NVIDIA keeps the architecture

	image []byte
}

// Parse reads image's ELF header. It fails when image is not an ELF image:
// too short for the header, or without the ELF magic.
func Parse(image []byte) (*File, error) {
	if len(image) < headerBytes {
		return nil, fmt.Errorf("not a cubin: %d bytes, shorter than an ELF header", len(image))
	}
	if !bytes.HasPrefix(image, []byte(elf.ELFMAG)) {
		return nil, errors.New("not a cubin: no ELF magic")
	}
	return &File{
		Machine:    elf.Machine(binary.LittleEndian.Uint16(image[18:])),
		ABIVersion: image[elf.EI_ABIVERSION],
		Flags:      binary.LittleEndian.Uint32(image[48:]),
		image:      image,
	}, nil
}

// IsCubin reports whether the image is code for an NVIDIA GPU.
func (f *File) IsCubin() bool { return f.Machine == MachineCUDA }

// Arch returns the SM architecture the cubin was built for, such as
// "sm_90", from its header flags: the low byte before ELF ABI version 8,
// the second byte from version 8 on (CUDA 12.8 and later). It is "" when
// the flags name none.
func (f *File) Arch() string {
	sm := f.Flags & 0xff
	if f.ABIVersion >= 8 {
		sm = (f.Flags >> 8) & 0xff
	}
	if sm == 0 {
		return ""
	}
	return fmt.Sprintf("sm_%d", sm)
}

// Functions returns the names of the functions the image defines (named
// STT_FUNC symbols of a section), in symbol-table order.
func (f *File) Functions() ([]string, error) {
	// NVIDIA keeps its own version numbers in the ELF version fields, which
	// debug/elf rejects; the rest is standard ELF64. Parse a patched view.
	header := bytes.Clone(f.image[:24])
	header[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(header[20:], uint32(elf.EV_CURRENT))
	ef, err := elf.NewFile(io.NewSectionReader(patchedReader{header, f.image}, 0, int64(len(f.image))))
	if err != nil {
		return nil, fmt.Errorf("cubin: %w", err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		return nil, fmt.Errorf("cubin: %w", err)
	}
	var names []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name != "" && s.Section != elf.SHN_UNDEF {
			names = append(names, s.Name)
		}
	}
	return names, nil
}

// patchedReader reads image with its first bytes replaced by header.
type patchedReader struct{ header, image []byte }

func (p patchedReader) ReadAt(b []byte, off int64) (int, error) {
	if off >= int64(len(p.image)) {
		return 0, io.EOF
	}
	n := copy(b, p.image[off:])
	if off < int64(len(p.header)) {
		copy(b, p.header[off:])
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}
