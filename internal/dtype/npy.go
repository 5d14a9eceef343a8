package dtype

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// npyDescr is each type's NumPy dtype string; bf16 has none in NumPy
// itself and is written as uint16 (view it with ml_dtypes.bfloat16).
var npyDescr = map[string]string{
	"f32": "<f4", "f64": "<f8", "f16": "<f2", "bf16": "<u2",
	"i8": "|i1", "u8": "|u1", "i16": "<i2", "i32": "<i4", "u32": "<u4", "i64": "<i8",
}

// NPY returns data as a NumPy .npy file (format version 1.0) of this type
// and shape; an empty shape is one dimension holding all of data.
func (d *Type) NPY(data []byte, shape []int) ([]byte, error) {
	if len(data)%d.Size != 0 {
		return nil, fmt.Errorf("%d bytes are not a whole number of %s elements (%d bytes each)", len(data), d.Name, d.Size)
	}
	n := len(data) / d.Size
	if len(shape) == 0 {
		shape = []int{n}
	}
	count, dims := 1, make([]string, len(shape))
	for i, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("shape %v: negative dimension", shape)
		}
		// Past the data's element count the shape cannot match it; stopping there also keeps
		// the product from overflowing into a match.
		if s != 0 && count > n/s+1 {
			return nil, fmt.Errorf("shape %v holds more elements than the data's %d %s elements", shape, n, d.Name)
		}
		count *= s
		dims[i] = fmt.Sprint(s)
	}
	if count != n {
		return nil, fmt.Errorf("shape %v holds %d elements, the data has %d %s elements", shape, count, n, d.Name)
	}
	tuple := strings.Join(dims, ", ")
	if len(dims) == 1 {
		tuple += ","
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", npyDescr[d.Name], tuple)
	// magic (6) + version (2) + header length (2) + header, padded with
	// spaces and a newline to a multiple of 64 bytes.
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(out[8:], uint16(len(header)))
	out = append(out, header...)
	return append(out, data...), nil
}
