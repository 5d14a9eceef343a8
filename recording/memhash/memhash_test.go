package memhash

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
)

// vectorData regenerates a known-answer input: SHA-256 in counter mode, as
// scripts/gen-hash-vectors writes it.
func vectorData(seed int, n int) []byte {
	if seed < 0 {
		return make([]byte, n)
	}
	out := make([]byte, 0, n+32)
	for i := uint64(0); len(out) < n; i++ {
		msg := append([]byte("gpurr-h128"), binary.LittleEndian.AppendUint32(nil, uint32(seed))...)
		msg = binary.LittleEndian.AppendUint64(msg, i)
		sum := sha256.Sum256(msg)
		out = append(out, sum[:]...)
	}
	return out[:n]
}

// The vectors come from an independent Python implementation of
// docs/hash.md; the GPU kernel is tested against this package.
func TestKnownAnswers(t *testing.T) {
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Seed   int      `json:"seed"`
			Length int      `json:"length"`
			Region string   `json:"region"`
			Chunks []string `json:"chunks"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 10 {
		t.Fatalf("only %d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		region, chunks := Hash(vectorData(v.Seed, v.Length))
		if got := region.String(); got != v.Region {
			t.Errorf("seed %d, %d bytes: region %s, want %s", v.Seed, v.Length, got, v.Region)
		}
		if len(chunks) != len(v.Chunks) {
			t.Errorf("seed %d, %d bytes: %d chunks, want %d", v.Seed, v.Length, len(chunks), len(v.Chunks))
			continue
		}
		for i, c := range chunks {
			if c.String() != v.Chunks[i] {
				t.Errorf("seed %d, %d bytes: chunk %d %s, want %s", v.Seed, v.Length, i, c, v.Chunks[i])
			}
		}
	}
}

func TestEveryBitMatters(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 16, 17, 4096, 65536, 65536 + 33} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		base, _ := Hash(data)
		for range 64 {
			i, bit := r.IntN(n), byte(1)<<r.IntN(8)
			data[i] ^= bit
			if h, _ := Hash(data); h == base {
				t.Fatalf("%d bytes: flipping bit %d of byte %d left the hash unchanged", n, bit, i)
			}
			data[i] ^= bit
		}
	}
}

func TestLengthMatters(t *testing.T) {
	// Zero padding must not make a buffer equal to its zero-extended self.
	seen := map[Sum]int{}
	for n := 0; n <= 70; n++ {
		h, _ := Hash(make([]byte, n))
		if m, ok := seen[h]; ok {
			t.Fatalf("%d and %d zero bytes hash alike", m, n)
		}
		seen[h] = n
	}
}

func TestChunksDependOnContentOnly(t *testing.T) {
	data := vectorData(7, 3*ChunkSize)
	copy(data[2*ChunkSize:], data[:ChunkSize]) // chunk 2 repeats chunk 0
	_, chunks := Hash(data)
	if chunks[0] != chunks[2] || chunks[0] == chunks[1] {
		t.Fatalf("chunk hashes %v: want chunk 0 == chunk 2 != chunk 1", chunks)
	}
}

func TestRegionOfEncodedEqualsRegion(t *testing.T) {
	for _, n := range []int{0, 1, ChunkSize, 5*ChunkSize + 3} {
		data := vectorData(n, n)
		region, chunks := Hash(data)
		var enc []byte
		for _, c := range chunks {
			b := c.Bytes()
			enc = append(enc, b[:]...)
		}
		if got := RegionOfEncoded(enc, uint64(n)); got != region {
			t.Errorf("%d bytes: RegionOfEncoded %v, Region %v", n, got, region)
		}
	}
}

func TestChunkRejectsOversize(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Chunk accepted more than ChunkSize bytes")
		}
	}()
	Chunk(make([]byte, ChunkSize+1))
}

func FuzzHash(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add([]byte("gpurr"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		region, chunks := Hash(data)
		if want := Region(chunks, uint64(len(data))); region != want {
			t.Fatal("region differs from the fold of its chunks")
		}
		// A different length never collides through padding alone.
		if len(data) > 0 {
			short := data[:int(cut)%len(data)]
			if h, _ := Hash(short); h == region {
				t.Fatalf("%d-byte prefix hashes like the %d-byte buffer", len(short), len(data))
			}
		}
	})
}

func BenchmarkChunk(b *testing.B) {
	data := vectorData(1, ChunkSize)
	b.SetBytes(ChunkSize)
	for b.Loop() {
		Chunk(data)
	}
}
