// Package locatetest writes small fake shared libraries for tests of
// library searches: ELF files with just a dynamic symbol table and a
// DT_SONAME, enough for locate.CheckLibrary, built in Go so that tests
// need no compiler and no fixtures.
package locatetest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Library describes a fake library.
type Library struct {
	Soname  string
	Exports []string    // defined dynamic symbols
	Imports []string    // undefined dynamic symbols
	Machine elf.Machine // 0: this machine's
	Type    elf.Type    // 0: ET_DYN
}

// Write writes lib as an ELF file at path, creating its directory.
func Write(t testing.TB, path string, lib Library) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, Bytes(lib), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Bytes returns lib as the bytes of a little-endian ELF64 file.
func Bytes(lib Library) []byte {
	machine := lib.Machine
	if machine == 0 {
		machine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64}[runtime.GOARCH]
	}
	typ := lib.Type
	if typ == 0 {
		typ = elf.ET_DYN
	}

	// Section 1 .dynstr, 2 .dynsym, 3 .dynamic, 4 .shstrtab.
	var dynstr bytes.Buffer
	dynstr.WriteByte(0)
	addStr := func(s string) uint32 {
		off := uint32(dynstr.Len())
		dynstr.WriteString(s)
		dynstr.WriteByte(0)
		return off
	}
	var dynsym, dynamic bytes.Buffer
	le := binary.LittleEndian
	binary.Write(&dynsym, le, elf.Sym64{}) // the null symbol
	for _, name := range lib.Exports {
		binary.Write(&dynsym, le, elf.Sym64{Name: addStr(name), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: 1, Value: 0x1000})
	}
	for _, name := range lib.Imports {
		binary.Write(&dynsym, le, elf.Sym64{Name: addStr(name), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC)})
	}
	if lib.Soname != "" {
		binary.Write(&dynamic, le, elf.Dyn64{Tag: int64(elf.DT_SONAME), Val: uint64(addStr(lib.Soname))})
	}
	binary.Write(&dynamic, le, elf.Dyn64{Tag: int64(elf.DT_NULL)})
	shstr := []byte("\x00.dynstr\x00.dynsym\x00.dynamic\x00.shstrtab\x00")

	const ehsize, shentsize = 64, 64
	type sec struct {
		name       uint32
		typ        elf.SectionType
		data       []byte
		link       uint32
		entsize    uint64
		info, algn uint64
	}
	secs := []sec{
		{name: 1, typ: elf.SHT_STRTAB, data: dynstr.Bytes(), algn: 1},
		{name: 9, typ: elf.SHT_DYNSYM, data: dynsym.Bytes(), link: 1, entsize: 24, info: 1, algn: 8},
		{name: 17, typ: elf.SHT_DYNAMIC, data: dynamic.Bytes(), link: 1, entsize: 16, algn: 8},
		{name: 26, typ: elf.SHT_STRTAB, data: shstr, algn: 1},
	}
	var body bytes.Buffer
	offs := make([]uint64, len(secs))
	for i, s := range secs {
		for (ehsize+body.Len())%8 != 0 {
			body.WriteByte(0)
		}
		offs[i] = uint64(ehsize + body.Len())
		body.Write(s.data)
	}
	for (ehsize+body.Len())%8 != 0 {
		body.WriteByte(0)
	}
	shoff := uint64(ehsize + body.Len())

	var out bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(typ), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Shoff: shoff, Ehsize: ehsize, Phentsize: 56, Shentsize: shentsize,
		Shnum: uint16(len(secs) + 1), Shstrndx: uint16(len(secs)),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.Write(&out, le, hdr)
	out.Write(body.Bytes())
	binary.Write(&out, le, elf.Section64{}) // the null section
	for i, s := range secs {
		binary.Write(&out, le, elf.Section64{
			Name: s.name, Type: uint32(s.typ), Off: offs[i], Size: uint64(len(s.data)),
			Link: s.link, Info: uint32(s.info), Addralign: s.algn, Entsize: s.entsize,
		})
	}
	return out.Bytes()
}
