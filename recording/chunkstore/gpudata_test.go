package chunkstore

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// gpuData is a kind of device memory the agent snapshots, made up
// reproducibly for tests and the codec benchmark.
type gpuData struct {
	name string
	make func(r *rand.Rand, n int) []byte
}

var gpuKinds = []gpuData{
	{"fp32-weights", fp32Weights},
	{"bf16-activations", bf16Activations},
	{"fp32-zeros", func(_ *rand.Rand, n int) []byte { return make([]byte, n) }},
	{"fp32-sparse-grads", fp32SparseGrads},
	{"int64-indices", int64Indices},
	{"random", randomBytes},
}

// fp32Weights: N(0, 0.02), the usual initialisation of a linear layer.
func fp32Weights(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.NormFloat64()*0.02)))
	}
	return b
}

// bf16Activations: GELU of N(0, 1), rounded to bfloat16.
func bf16Activations(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+2 <= n; i += 2 {
		x := r.NormFloat64()
		gelu := 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
		bits := math.Float32bits(float32(gelu))
		bits += 0x7FFF + (bits>>16)&1 // round to nearest even
		binary.LittleEndian.PutUint16(b[i:], uint16(bits>>16))
	}
	return b
}

// fp32SparseGrads: 95% zeros, the rest N(0, 1e-3), as in the gradient of an
// embedding table after a batch touched few rows.
func fp32SparseGrads(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		if r.IntN(20) == 0 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.NormFloat64()*1e-3)))
		}
	}
	return b
}

// int64Indices: token ids of a 50257-word vocabulary.
func int64Indices(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], uint64(r.IntN(50257)))
	}
	return b
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}
