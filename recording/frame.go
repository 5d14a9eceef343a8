package recording

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// File header: magic, major, minor, reserved.
const (
	magic      = "GPURREC\n"
	headerSize = 16

	// MajorVersion changes when a reader of the previous major cannot read
	// the file; readers refuse a newer major.
	MajorVersion = 1
	// MinorVersion changes when fields or records are added; readers of an
	// older minor skip what they do not know.
	MinorVersion = 18
)

// Frame header: payload length, CRC-32C of the payload, codec, reserved.
const (
	frameHeaderSize = 12
	codecRaw        = 0
	codecZstd       = 1

	maxFramePayload = 256 << 20 // compressed, on disk
	maxFrameDecoded = 1 << 30   // after decompression
)

// decodedLimit is the most a zstd frame of n compressed bytes may decode to. Batches compress
// by 3-20x; a frame claiming far more is damaged or hostile, and refusing it before allocating
// keeps a small file from costing gigabytes of memory. The writer stores a payload raw when
// compressing it would pass this limit, so every frame it writes stays readable.
func decodedLimit(n int) int { return min(maxFrameDecoded, max(16<<20, 256*n)) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeFileHeader() []byte {
	h := make([]byte, headerSize)
	copy(h, magic)
	binary.LittleEndian.PutUint16(h[8:], MajorVersion)
	binary.LittleEndian.PutUint16(h[10:], MinorVersion)
	return h
}

// Version is a file's format version.
type Version struct{ Major, Minor uint16 }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

var errNotRecording = errors.New("not a gpurr recording (bad magic)")

// ErrNewerVersion is wrapped by the error for a file of a newer major format version.
var ErrNewerVersion = errors.New("upgrade gpurr")

func decodeFileHeader(h []byte) (Version, error) {
	if len(h) < headerSize {
		return Version{}, errTruncatedHeader
	}
	if string(h[:8]) != magic {
		return Version{}, errNotRecording
	}
	v := Version{binary.LittleEndian.Uint16(h[8:]), binary.LittleEndian.Uint16(h[10:])}
	if v.Major > MajorVersion {
		return v, fmt.Errorf("format version %s is newer than this gpurr reads (%d.x): %w", v, MajorVersion, ErrNewerVersion)
	}
	if v.Major == 0 {
		return v, fmt.Errorf("format version %s is not valid", v)
	}
	return v, nil
}

var errTruncatedHeader = errors.New("file header cut short")

var (
	encoderOnce sync.Once
	encoder     *zstd.Encoder
	decoderOnce sync.Once
	decoder     *zstd.Decoder
)

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
func zstdEncoder() *zstd.Encoder {
	encoderOnce.Do(func() {
		// SpeedFastest: frames are written off the program's path, but the
		// agent shares the machine with the program; fastest compresses
		// launch batches to a fraction of their size at several hundred MB/s.
		encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	})
	return encoder
}

func zstdDecoder() *zstd.Decoder {
	decoderOnce.Do(func() {
		decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxFrameDecoded), zstd.WithDecodeAllCapLimit(true))
	})
	return decoder
}

// appendFrame appends one frame holding payload, compressed, to dst.
func appendFrame(dst, payload []byte) []byte {
	body, codec := zstdEncoder().EncodeAll(payload, nil), byte(codecZstd)
	if len(payload) > decodedLimit(len(body)) {
		body, codec = payload, codecRaw
	}
	return appendFrameBody(dst, body, codec)
}

// appendRawFrame appends one frame holding payload as it is.
func appendRawFrame(dst, payload []byte) []byte { return appendFrameBody(dst, payload, codecRaw) }

func appendFrameBody(dst, body []byte, codec byte) []byte {
	var h [frameHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(body, castagnoli))
	h[8] = codec
	dst = append(dst, h[:]...)
	return append(dst, body...)
}

// frameReader yields frame payloads from r, which is positioned after the
// file header. offset counts bytes from the start of the file.
type frameReader struct {
	r      io.Reader
	offset int64
	buf    []byte
}

// errTruncated marks a frame cut short at the end of the file: what came
// before it is good.
var errTruncated = errors.New("truncated")

// next returns the next decoded payload, io.EOF at a clean end, errTruncated
// when the file ends inside a frame, or another error for corrupt data.
func (fr *frameReader) next() ([]byte, error) {
	var h [frameHeaderSize]byte
	n, err := io.ReadFull(fr.r, h[:])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err == io.ErrUnexpectedEOF {
		return nil, errTruncated
	}
	if err != nil {
		return nil, err
	}
	start := fr.offset
	fr.offset += int64(n)
	size := binary.LittleEndian.Uint32(h[0:])
	sum := binary.LittleEndian.Uint32(h[4:])
	codec := h[8]
	if size > maxFramePayload {
		return nil, fmt.Errorf("frame at offset %d: length %d exceeds the limit of %d", start, size, maxFramePayload)
	}
	if cap(fr.buf) < int(size) {
		fr.buf = make([]byte, size)
	}
	body := fr.buf[:size]
	n, err = io.ReadFull(fr.r, body)
	fr.offset += int64(n)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return nil, errTruncated
	}
	if err != nil {
		return nil, err
	}
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("frame at offset %d: checksum mismatch (corrupt file)", start)
	}
	switch codec {
	case codecRaw:
		return append([]byte(nil), body...), nil
	case codecZstd:
		limit := decodedLimit(len(body))
		var zh zstd.Header
		if err := zh.Decode(body); err != nil {
			return nil, fmt.Errorf("frame at offset %d: %v", start, err)
		}
		if zh.HasFCS && zh.FrameContentSize > uint64(limit) {
			return nil, fmt.Errorf("frame at offset %d: %d compressed bytes claim to decode to %d, more than the limit of %d (corrupt file)",
				start, len(body), zh.FrameContentSize, limit)
		}
		// The decoder stops at dst's capacity: a frame that lies about its size costs no more.
		var out []byte
		var err error
		if zh.HasFCS {
			out, err = zstdDecoder().DecodeAll(body, make([]byte, 0, zh.FrameContentSize))
		} else {
			// Only payloads under 256 bytes leave the size out: try small, then the limit.
			out, err = zstdDecoder().DecodeAll(body, make([]byte, 0, min(limit, 4096)))
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				out, err = zstdDecoder().DecodeAll(body, make([]byte, 0, limit))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("frame at offset %d: %v", start, err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("frame at offset %d: unknown codec %d", start, codec)
	}
}
