//go:build ignore

// gen.go writes the fat binaries of this folder around kernel.ptx, assembled by hand after the
// layout package fatbin documents (nvcc is not needed): go run gen.go.
//
//	plain.fatbin  PTX for sm_80 uncompressed, then a stand-in ELF entry for sm_90
//	lz4.fatbin    the PTX as an LZ4 block (flag 0x2000)
//	zstd.fatbin   the PTX as a zstd frame (flag 0x8000)
//	two.fatbin    two containers, one after the other: PTX for sm_80, then PTX for sm_100
//	noptx.fatbin  only the ELF entry
//	newer.fatbin  PTX for sm_100 only
package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

type entry struct {
	kind  uint16
	arch  uint32
	flags uint64
	data  []byte // as stored
	size  uint64 // uncompressed
}

func container(es ...entry) []byte {
	var body bytes.Buffer
	for _, e := range es {
		padded := (len(e.data) + 7) &^ 7
		h := make([]byte, 64)
		binary.LittleEndian.PutUint16(h[0:], e.kind)
		binary.LittleEndian.PutUint16(h[2:], 0x0101)
		binary.LittleEndian.PutUint32(h[4:], 64)
		binary.LittleEndian.PutUint64(h[8:], uint64(padded))
		binary.LittleEndian.PutUint32(h[16:], uint32(len(e.data)))
		binary.LittleEndian.PutUint16(h[24:], 0)
		binary.LittleEndian.PutUint16(h[26:], 8)
		binary.LittleEndian.PutUint32(h[28:], e.arch)
		binary.LittleEndian.PutUint64(h[40:], 0x11|e.flags) // 64-bit, Linux
		binary.LittleEndian.PutUint64(h[56:], e.size)
		body.Write(h)
		body.Write(e.data)
		body.Write(make([]byte, padded-len(e.data)))
	}
	h := make([]byte, 16)
	binary.LittleEndian.PutUint32(h[0:], 0xBA55ED50)
	binary.LittleEndian.PutUint16(h[4:], 1)
	binary.LittleEndian.PutUint16(h[6:], 16)
	binary.LittleEndian.PutUint64(h[8:], uint64(body.Len()))
	return append(h, body.Bytes()...)
}

func main() {
	ptx, err := os.ReadFile("kernel.ptx")
	if err != nil {
		panic(err)
	}
	text := append(ptx, 0) // nvcc's PTX entries end with a NUL
	plain := entry{kind: 1, arch: 80, data: text, size: uint64(len(text))}
	elf := entry{kind: 2, arch: 90, data: []byte("\x7fELF stand-in for a cubin"), size: 25}

	block := make([]byte, lz4.CompressBlockBound(len(text)))
	n, err := lz4.CompressBlock(text, block, nil)
	if err != nil || n == 0 {
		panic("lz4")
	}
	enc, _ := zstd.NewWriter(nil)
	z := enc.EncodeAll(text, nil)

	newer := []byte(strings.Replace(string(text), "sm_80", "sm_100", 1))
	files := map[string][]byte{
		"plain.fatbin": container(plain, elf),
		"lz4.fatbin":   container(entry{kind: 1, arch: 80, flags: 0x2000, data: block[:n], size: uint64(len(text))}),
		"zstd.fatbin":  container(entry{kind: 1, arch: 80, flags: 0x8000, data: z, size: uint64(len(text))}),
		"two.fatbin":   append(container(plain), container(entry{kind: 1, arch: 100, data: newer, size: uint64(len(newer))})...),
		"noptx.fatbin": container(elf),
		"newer.fatbin": container(entry{kind: 1, arch: 100, data: newer, size: uint64(len(newer))}),
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			panic(err)
		}
	}
}
