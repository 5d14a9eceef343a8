// Package symtab names native code from ELF symbol tables: given an
// object's path and an address in it (a pc less the object's load bias,
// which is the ELF virtual address for shared objects, PIE and non-PIE
// executables alike), it finds the function symbol that holds the address.
// Both .symtab and .dynsym are read, so static C functions, Go functions
// and the C wrappers of cgo programs are named where the object keeps its
// .symtab, and exported functions still are where it was stripped.
//
// The agent's writer uses it to name the frames of native callstacks, once
// per distinct address, off the program's threads.
package symtab

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// function is one function symbol; its name stays in the file.
type function struct {
	start   uint64
	size    uint32 // 0: unknown (hand-written assembly); the function ends where the next begins
	nameOff uint32 // offset of the name in its string table
	dynamic bool   // from .dynsym, whose names are in .dynstr
	rank    uint8  // global > weak > local, .symtab over .dynsym: see read
}

// Table is the function symbols of one ELF object, sorted by address.
// Names are read from the file when asked for, so a table holds a few
// words per function, not the object's (often tens of MB of) names.
type Table struct {
	file    *os.File
	funcs   []function
	strings [2]*io.SectionReader // .strtab, .dynstr; nil when absent
}

// Open reads the function symbols of the ELF object at path. An object
// without symbol tables gives an empty table, not an error.
func Open(path string) (*Table, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	t, err := read(file)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func read(file *os.File) (*Table, error) {
	f, err := elf.NewFile(file)
	if err != nil {
		return nil, err
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, errors.New("not a 64-bit little-endian ELF object")
	}
	t := &Table{file: file}
	for i, kind := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		syms := f.SectionByType(kind)
		if syms == nil || int(syms.Link) >= len(f.Sections) {
			continue
		}
		strs := f.Sections[syms.Link]
		t.strings[i] = io.NewSectionReader(file, int64(strs.Offset), int64(strs.Size))
		if err := t.add(syms, kind == elf.SHT_DYNSYM); err != nil {
			return nil, fmt.Errorf("read %s: %w", syms.Name, err)
		}
	}
	// Aliases share an address: the largest symbol, then a global over a
	// weak over a local one, then .symtab's, then the first in the file
	// names it.
	slices.SortStableFunc(t.funcs, func(a, b function) int {
		if a.start != b.start {
			return cmpUint64(a.start, b.start)
		}
		if a.size != b.size {
			return cmpUint64(uint64(b.size), uint64(a.size))
		}
		return int(b.rank) - int(a.rank)
	})
	t.funcs = slices.CompactFunc(t.funcs, func(a, b function) bool { return a.start == b.start })
	t.funcs = slices.Clip(t.funcs)
	return t, nil
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// add appends the defined function symbols of a symbol table section,
// streamed entry by entry: the .symtab of a large library holds tens of MB.
func (t *Table) add(syms *elf.Section, dynamic bool) error {
	const entrySize = 24 // Elf64_Sym
	r := bufio.NewReaderSize(syms.Open(), 64<<10)
	if _, err := r.Discard(entrySize); err != nil { // entry 0 is the undefined symbol
		return nil
	}
	var e [entrySize]byte
	for {
		if _, err := io.ReadFull(r, e[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		name := binary.LittleEndian.Uint32(e[0:])
		info, shndx := e[4], elf.SectionIndex(binary.LittleEndian.Uint16(e[6:]))
		value, size := binary.LittleEndian.Uint64(e[8:]), binary.LittleEndian.Uint64(e[16:])
		typ, bind := elf.ST_TYPE(info), elf.ST_BIND(info)
		if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC || shndx == elf.SHN_UNDEF || value == 0 || name == 0 {
			continue
		}
		rank := uint8(0)
		switch bind {
		case elf.STB_GLOBAL:
			rank = 4
		case elf.STB_WEAK:
			rank = 2
		}
		if !dynamic {
			rank++
		}
		t.funcs = append(t.funcs, function{
			start: value, size: uint32(min(size, 1<<32-1)), nameOff: name, dynamic: dynamic, rank: rank,
		})
	}
}

// Name returns the name of the function that holds addr, "" when none
// does (or its name cannot be read).
func (t *Table) Name(addr uint64) string {
	i, found := slices.BinarySearchFunc(t.funcs, addr, func(f function, a uint64) int { return cmpUint64(f.start, a) })
	if !found {
		i--
	}
	if i < 0 {
		return ""
	}
	f := t.funcs[i]
	if f.size > 0 && addr-f.start >= uint64(f.size) {
		return ""
	}
	if f.size == 0 && (i+1 == len(t.funcs) && addr != f.start || i+1 < len(t.funcs) && addr >= t.funcs[i+1].start) {
		return ""
	}
	strs := t.strings[0]
	if f.dynamic {
		strs = t.strings[1]
	}
	return readString(strs, int64(f.nameOff))
}

// maxName bounds a name read from a damaged string table; C++ names of
// deeply nested templates reach a few KB.
const maxName = 64 << 10

func readString(r *io.SectionReader, off int64) string {
	var name []byte
	buf := make([]byte, 256)
	for len(name) < maxName {
		n, err := r.ReadAt(buf, off)
		if i := slices.Index(buf[:n], 0); i >= 0 {
			return string(append(name, buf[:i]...))
		}
		if err != nil {
			return ""
		}
		name = append(name, buf[:n]...)
		off += int64(n)
	}
	return ""
}

// Close closes the object's file.
func (t *Table) Close() error { return t.file.Close() }

// Cache names addresses in many objects, keeping the tables of the most
// recently used ones open. It is not safe for concurrent use.
type Cache struct {
	limit  int
	tables map[string]*cached
	failed map[string]bool
	clock  uint64
}

type cached struct {
	t    *Table
	used uint64
}

// NewCache returns a cache that keeps at most limit tables.
func NewCache(limit int) *Cache {
	return &Cache{limit: limit, tables: map[string]*cached{}, failed: map[string]bool{}}
}

// Name returns the name of the function that holds addr in the object at
// path, "" when there is none. The first lookup in an object that cannot
// be read (missing, not ELF) returns the reason, so the caller can report
// it once; later lookups there return "" and no error.
func (c *Cache) Name(path string, addr uint64) (string, error) {
	c.clock++
	if e := c.tables[path]; e != nil {
		e.used = c.clock
		return e.t.Name(addr), nil
	}
	if c.failed[path] {
		return "", nil
	}
	t, err := Open(path)
	if err != nil {
		c.failed[path] = true
		return "", err
	}
	if len(c.tables) >= c.limit {
		c.evict()
	}
	c.tables[path] = &cached{t, c.clock}
	return t.Name(addr), nil
}

func (c *Cache) evict() {
	var oldest string
	for path, e := range c.tables {
		if oldest == "" || e.used < c.tables[oldest].used {
			oldest = path
		}
	}
	c.tables[oldest].t.Close()
	delete(c.tables, oldest)
}

// Close closes every table's file.
func (c *Cache) Close() {
	for path, e := range c.tables {
		e.t.Close()
		delete(c.tables, path)
	}
}
