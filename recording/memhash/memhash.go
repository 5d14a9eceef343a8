// Package memhash computes gpurr-h128, the 128-bit hash gpurr uses for
// device memory: the agent computes it on the GPU (internal/kernels/src/
// hash.cu) for every region and every 64 KiB chunk a kernel can touch, and
// this package computes the identical value on the CPU, to check snapshots
// and to test the GPU kernel bit for bit. docs/hash.md specifies it.
//
// The hash is built for GPU throughput, not for adversaries: 32-bit
// multiply-rotate rounds over 256 independent lane groups per chunk, folded
// in a fixed order. A chunk's hash depends only on its bytes, so equal
// chunks anywhere in memory hash alike (the snapshot store deduplicates by
// it); a region's hash folds its chunks' hashes and its length.
package memhash

import (
	"encoding/binary"
	"encoding/hex"
	"math/bits"
)

// ChunkSize is the number of bytes covered by one chunk hash: the chunk of
// the format (MemoryConfig.chunk_bytes, the largest entry of the chunk
// store) and of the agent's capture. The C and CUDA sides repeat it
// (GP_CHUNK in internal/agent, CHUNK in internal/kernels/src/hash.cu); a
// test of internal/kernels reads them and fails when they differ.
const ChunkSize = 64 << 10

// Groups is the number of independent lane groups in a chunk (one GPU
// thread each); stripes are dealt to groups round-robin.
const Groups = 256

const stripe = 16 // bytes: four little-endian uint32 words, one per lane

const (
	p1 uint32 = 0x9E3779B1
	p2 uint32 = 0x85EBCA77
	p3 uint32 = 0xC2B2AE3D
	p4 uint32 = 0x27D4EB2F
	p5 uint32 = 0x165667B1
)

// Sum is a 128-bit hash: four 32-bit lanes.
type Sum [4]uint32

// Bytes is the hash as 16 bytes, lanes little-endian, lane 0 first.
func (s Sum) Bytes() [16]byte {
	var b [16]byte
	for l, v := range s {
		binary.LittleEndian.PutUint32(b[4*l:], v)
	}
	return b
}

// String is the hash as 32 lower-case hex digits of Bytes.
func (s Sum) String() string {
	b := s.Bytes()
	return hex.EncodeToString(b[:])
}

func round(acc, input uint32) uint32 {
	return bits.RotateLeft32(acc+input*p2, 13) * p1
}

// avalanche mixes every output bit into every lane.
func avalanche(h Sum) Sum {
	for range 2 {
		for l := range h {
			v := h[l]
			v ^= v >> 15
			v *= p2
			v ^= v >> 13
			v *= p3
			v ^= v >> 16
			h[l] = v
		}
		h[0] += h[1]
		h[1] += h[2]
		h[2] += h[3]
		h[3] += h[0]
	}
	return h
}

// Chunk hashes one chunk of at most ChunkSize bytes.
func Chunk(c []byte) Sum {
	if len(c) > ChunkSize {
		panic("memhash: chunk longer than ChunkSize")
	}
	var groups [Groups]Sum
	for g := range groups {
		for l := range 4 {
			groups[g][l] = p1*uint32(l+1) + p2*uint32(g)
		}
	}
	full := len(c) / stripe
	for s := range full {
		g := &groups[s%Groups]
		w := c[s*stripe:]
		for l := range 4 {
			g[l] = round(g[l], binary.LittleEndian.Uint32(w[4*l:]))
		}
	}
	if rest := len(c) % stripe; rest != 0 {
		var last [stripe]byte // the tail stripe, zero-padded
		copy(last[:], c[full*stripe:])
		g := &groups[full%Groups]
		for l := range 4 {
			g[l] = round(g[l], binary.LittleEndian.Uint32(last[4*l:]))
		}
	}
	n := uint32(len(c))
	h := Sum{p3 ^ n, p4 ^ n, p5 ^ n, p1 ^ n}
	for g := range groups {
		for l := range 4 {
			h[l] = round(h[l], groups[g][l])
		}
	}
	return avalanche(h)
}

// Region hashes a whole region from its chunk hashes, in order, and its
// length in bytes.
func Region(chunks []Sum, length uint64) Sum {
	h := regionStart(length)
	for _, c := range chunks {
		for l := range 4 {
			h[l] = round(h[l], c[l])
		}
	}
	return avalanche(h)
}

// RegionOfEncoded is Region over chunk hashes given in their 16-byte
// encoding (Sum.Bytes), one after another, as the GPU kernel writes them.
func RegionOfEncoded(chunks []byte, length uint64) Sum {
	if len(chunks)%16 != 0 {
		panic("memhash: encoded chunk hashes are not a multiple of 16 bytes")
	}
	h := regionStart(length)
	for off := 0; off < len(chunks); off += 16 {
		for l := range 4 {
			h[l] = round(h[l], binary.LittleEndian.Uint32(chunks[off+4*l:]))
		}
	}
	return avalanche(h)
}

func regionStart(length uint64) Sum {
	lo, hi := uint32(length), uint32(length>>32)
	return Sum{p5 ^ lo, p4 ^ hi, p3 ^ lo, p2 ^ hi}
}

// Hash returns the hash of data as a region, and the hashes of its chunks.
func Hash(data []byte) (region Sum, chunks []Sum) {
	for off := 0; off < len(data); off += ChunkSize {
		chunks = append(chunks, Chunk(data[off:min(off+ChunkSize, len(data))]))
	}
	return Region(chunks, uint64(len(data))), chunks
}
