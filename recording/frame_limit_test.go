package recording

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdFrame wraps a zstd body in a frame header.
func zstdFrame(body []byte) []byte {
	var h [frameHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(body, castagnoli))
	h[8] = codecZstd
	return append(h[:], body...)
}

// A few kilobytes that decode to 64 MiB are refused before the memory is taken, whether the
// frame states its size (one-shot encoding) or not (streaming encoding).
func TestFrameDecompressionBomb(t *testing.T) {
	zeros := make([]byte, 64<<20)
	stated := zstdEncoder().EncodeAll(zeros, nil)
	var streamed bytes.Buffer
	zw, err := zstd.NewWriter(&streamed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"stated size": stated, "no stated size": streamed.Bytes()} {
		if len(body) > 1<<20 {
			t.Fatalf("%s: %d compressed bytes, want a small bomb", name, len(body))
		}
		fr := &frameReader{r: bytes.NewReader(zstdFrame(body))}
		out, err := fr.next()
		if err == nil || len(out) != 0 {
			t.Errorf("%s: decoded %d bytes, want a refusal", name, len(out))
			continue
		}
		if !strings.Contains(err.Error(), "frame at offset 0") {
			t.Errorf("%s: error %q does not name the frame", name, err)
		}
	}
}

// The writer never makes a frame its reader refuses: a payload that compresses too well for
// the limit is stored raw.
func TestFrameHighlyCompressiblePayloadRoundTrips(t *testing.T) {
	payload := make([]byte, 40<<20)
	payload[123] = 7
	frame := appendFrame(nil, payload)
	if frame[8] != codecRaw {
		t.Errorf("codec %d, want raw for a payload that compresses beyond the reader's limit", frame[8])
	}
	small := bytes.Repeat([]byte("launch "), 1000)
	if f := appendFrame(nil, small); f[8] != codecZstd {
		t.Errorf("codec %d, want zstd for an ordinary payload", f[8])
	}
	for _, p := range [][]byte{payload, small, []byte("tiny")} {
		fr := &frameReader{r: bytes.NewReader(appendFrame(nil, p))}
		out, err := fr.next()
		if err != nil || !bytes.Equal(out, p) {
			t.Errorf("%d-byte payload: round trip gave %d bytes, %v", len(p), len(out), err)
		}
	}
}
