package chunkstore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpurr/gpurr/recording/memhash"
)

// Names inside a process recording directory; docs/chunkstore.md specifies
// the files.
const (
	DirName   = "chunks" // the store's folder in a process recording directory
	indexFile = "index"  // written at Close: every entry, sorted by hash
	indexTemp = "index.tmp"
)

// Format version of pack and index files.
const (
	// MajorVersion changes when a reader of the previous major cannot read
	// the files; readers refuse a newer major.
	MajorVersion = 1
	// MinorVersion changes when something readers may ignore is added.
	MinorVersion = 0
)

const (
	fileHeaderSize  = 16
	packMagic       = "GPURPAK\n"
	indexMagic      = "GPURIDX\n"
	entryHeaderSize = 36 // hash, codec, reserved, raw and stored length, data CRC, header CRC
	indexEntrySize  = 36 // hash, pack, offset, raw and stored length
	indexPackSize   = 12 // pack number, pack size
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// packName is the file name of pack number n (1, 2, ...).
func packName(n uint32) string { return fmt.Sprintf("pack-%06d.pack", n) }

// packNumber parses a pack file name; ok is false for any other name.
func packNumber(name string) (n uint32, ok bool) {
	digits, found := strings.CutPrefix(filepath.Base(name), "pack-")
	digits, suffixed := strings.CutSuffix(digits, ".pack")
	if !found || !suffixed || len(digits) < 6 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || v == 0 || packName(uint32(v)) != filepath.Base(name) {
		return 0, false
	}
	return uint32(v), true
}

func encodeFileHeader(magic string) []byte {
	h := make([]byte, fileHeaderSize)
	copy(h, magic)
	binary.LittleEndian.PutUint16(h[8:], MajorVersion)
	binary.LittleEndian.PutUint16(h[10:], MinorVersion)
	return h
}

var errNewerVersion = errors.New("newer format")

// checkFileHeader checks magic and version; what names the file.
func checkFileHeader(h []byte, magic, what string) error {
	if len(h) < fileHeaderSize {
		return fmt.Errorf("%s header cut short (%d of %d bytes)", what, len(h), fileHeaderSize)
	}
	if string(h[:8]) != magic {
		return fmt.Errorf("not a gpurr chunk %s (bad magic)", what)
	}
	major, minor := binary.LittleEndian.Uint16(h[8:]), binary.LittleEndian.Uint16(h[10:])
	if major > MajorVersion {
		return fmt.Errorf("%s format %d.%d is newer than this gpurr reads (%d.x): upgrade gpurr: %w", what, major, minor, MajorVersion, errNewerVersion)
	}
	if major == 0 {
		return fmt.Errorf("%s format %d.%d is not valid", what, major, minor)
	}
	return nil
}

// entryHeader is the fixed part of a pack entry.
type entryHeader struct {
	hash    [16]byte
	codec   Codec
	raw     uint32 // bytes of the chunk, 1..memhash.ChunkSize
	stored  uint32 // bytes that follow the header, 0..memhash.ChunkSize
	dataCRC uint32 // CRC-32C of the stored bytes
}

func (e *entryHeader) encode(b []byte) {
	_ = b[entryHeaderSize-1]
	copy(b, e.hash[:])
	b[16] = byte(e.codec)
	b[17], b[18], b[19] = 0, 0, 0
	binary.LittleEndian.PutUint32(b[20:], e.raw)
	binary.LittleEndian.PutUint32(b[24:], e.stored)
	binary.LittleEndian.PutUint32(b[28:], e.dataCRC)
	binary.LittleEndian.PutUint32(b[32:], crc(b[:32]))
}

// decodeEntryHeader checks and decodes b[:entryHeaderSize]. A header that
// passes has lengths in range, so the entry's extent can be trusted even
// when its codec is unknown.
func decodeEntryHeader(b []byte) (entryHeader, error) {
	var e entryHeader
	if len(b) < entryHeaderSize {
		return e, fmt.Errorf("entry header cut short")
	}
	if crc(b[:32]) != binary.LittleEndian.Uint32(b[32:]) {
		return e, errors.New("entry header checksum mismatch")
	}
	copy(e.hash[:], b)
	e.codec = Codec(b[16])
	e.raw = binary.LittleEndian.Uint32(b[20:])
	e.stored = binary.LittleEndian.Uint32(b[24:])
	e.dataCRC = binary.LittleEndian.Uint32(b[28:])
	if e.raw == 0 || e.raw > memhash.ChunkSize || e.stored > memhash.ChunkSize {
		return e, fmt.Errorf("entry lengths out of range (raw %d, stored %d, limit %d)", e.raw, e.stored, memhash.ChunkSize)
	}
	return e, nil
}

// location is where one entry is: the in-memory form of an index entry.
type location struct {
	hash   [16]byte
	pack   uint32
	raw    uint32
	stored uint32
	offset int64 // of the entry header in the pack
}

func (l *location) end() int64 { return l.offset + entryHeaderSize + int64(l.stored) }

func compareLocations(a, b location) int { return bytes.Compare(a.hash[:], b.hash[:]) }

// packSize is a pack's number and its length in bytes when the index was
// written.
type packSize struct {
	number uint32
	size   int64
}

// encodeIndex writes the index of entries (sorted by hash, no duplicates)
// over packs (sorted by number).
func encodeIndex(packs []packSize, entries []location) []byte {
	b := make([]byte, 0, fileHeaderSize+4+len(packs)*indexPackSize+8+len(entries)*indexEntrySize+4)
	b = append(b, encodeFileHeader(indexMagic)...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(packs)))
	for _, p := range packs {
		b = binary.LittleEndian.AppendUint32(b, p.number)
		b = binary.LittleEndian.AppendUint64(b, uint64(p.size))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(entries)))
	for _, e := range entries {
		b = append(b, e.hash[:]...)
		b = binary.LittleEndian.AppendUint32(b, e.pack)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.offset))
		b = binary.LittleEndian.AppendUint32(b, e.raw)
		b = binary.LittleEndian.AppendUint32(b, e.stored)
	}
	return binary.LittleEndian.AppendUint32(b, crc(b))
}

// decodeIndex checks and decodes an index file. Any bytes yield the index
// or an error; an index that passes names only listed packs, with entries
// inside each pack's recorded size, strictly sorted by hash.
func decodeIndex(b []byte) ([]packSize, []location, error) {
	if err := checkFileHeader(b, indexMagic, "index"); err != nil {
		return nil, nil, err
	}
	if len(b) < fileHeaderSize+4+8+4 {
		return nil, nil, errors.New("index cut short")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc(body) != sum {
		return nil, nil, errors.New("index checksum mismatch")
	}
	rest := body[fileHeaderSize:]
	nPacks := uint64(binary.LittleEndian.Uint32(rest))
	rest = rest[4:]
	if uint64(len(rest)) < nPacks*indexPackSize+8 {
		return nil, nil, fmt.Errorf("index lists %d packs but is too short for them", nPacks)
	}
	packs := make([]packSize, nPacks)
	for i := range packs {
		p := packSize{binary.LittleEndian.Uint32(rest), int64(binary.LittleEndian.Uint64(rest[4:]))}
		rest = rest[indexPackSize:]
		if p.number == 0 || p.size < fileHeaderSize || (i > 0 && p.number <= packs[i-1].number) {
			return nil, nil, fmt.Errorf("index pack entry %d is not valid (number %d, size %d)", i, p.number, p.size)
		}
		packs[i] = p
	}
	nEntries := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	if uint64(len(rest))%indexEntrySize != 0 || uint64(len(rest))/indexEntrySize != nEntries {
		return nil, nil, fmt.Errorf("index says %d entries but holds %d bytes of them", nEntries, len(rest))
	}
	entries := make([]location, nEntries)
	for i := range entries {
		e := &entries[i]
		copy(e.hash[:], rest)
		e.pack = binary.LittleEndian.Uint32(rest[16:])
		e.offset = int64(binary.LittleEndian.Uint64(rest[20:]))
		e.raw = binary.LittleEndian.Uint32(rest[28:])
		e.stored = binary.LittleEndian.Uint32(rest[32:])
		rest = rest[indexEntrySize:]
		if i > 0 && bytes.Compare(entries[i-1].hash[:], e.hash[:]) >= 0 {
			return nil, nil, fmt.Errorf("index entry %d is out of order", i)
		}
		j, found := slices.BinarySearchFunc(packs, e.pack, func(p packSize, n uint32) int { return cmp.Compare(p.number, n) })
		if !found || e.offset < fileHeaderSize || e.raw == 0 || e.raw > memhash.ChunkSize || e.stored > memhash.ChunkSize ||
			e.offset > packs[j].size || e.end() > packs[j].size {
			return nil, nil, fmt.Errorf("index entry %d points outside its pack", i)
		}
	}
	return packs, entries, nil
}
