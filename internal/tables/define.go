package tables

import pb "github.com/gpurr/gpurr/recording/recordingpb"

// A table's description and how each of its values is read from the
// record a row is made of (R): one list, so that a column is added,
// described and filled in one place.
type table[R any] struct {
	*Table
	get []func(*pass, *R) Value
}

// col is a column and how its value is read.
type col[R any] struct {
	Column
	get func(*pass, *R) Value
}

// cols are columns in order; c makes one, dims three.
type cols[R any] []col[R]

func define[R any](name, doc string, key []string, groups ...cols[R]) *table[R] {
	t := &table[R]{Table: &Table{Name: name, Doc: doc, Key: key}}
	for _, g := range groups {
		for _, c := range g {
			t.Columns = append(t.Columns, c.Column)
			t.get = append(t.get, c.get)
		}
	}
	return t
}

func c[R any](name string, typ Type, doc string, get func(*pass, *R) Value) cols[R] {
	return cols[R]{{Column{Name: name, Type: typ, Doc: doc}, get}}
}

// null marks the columns as ones that may hold NULL.
func (cs cols[R]) null() cols[R] {
	for i := range cs {
		cs[i].Null = true
	}
	return cs
}

// dict marks the columns as ones with few distinct values.
func (cs cols[R]) dict() cols[R] {
	for i := range cs {
		cs[i].Dict = true
	}
	return cs
}

// dims are the x, y and z columns of a Dim3: prefix_x "what x" and so on,
// 0 when the record has none.
func dims[R any](prefix, what string, get func(*R) *pb.Dim3) cols[R] {
	axis := func(name string, of func(*pb.Dim3) uint32) cols[R] {
		return c(prefix+"_"+name, Int64, what+" "+name, func(_ *pass, r *R) Value { return Int(of(get(r))) })
	}
	return append(append(axis("x", (*pb.Dim3).GetX), axis("y", (*pb.Dim3).GetY)...), axis("z", (*pb.Dim3).GetZ)...)
}

// optionalDims are dims, NULL when the record has none.
func optionalDims[R any](prefix, what string, get func(*R) *pb.Dim3) cols[R] {
	out := dims(prefix, what, get).null()
	for i := range out {
		of := out[i].get
		out[i].get = func(p *pass, r *R) Value {
			if get(r) == nil {
				return Null
			}
			return of(p, r)
		}
	}
	return out
}

// processCol is the first column of every table.
func processCol[R any]() cols[R] {
	return c("process", String, "the process's directory name in the recording", func(p *pass, _ *R) Value { return Text(p.name) }).dict()
}

// textOrNull is s, or NULL when s is empty.
func textOrNull(s string) Value {
	if s == "" {
		return Null
	}
	return Text(s)
}

// idOrNull is id, or NULL when it is 0 (none).
func idOrNull(id uint64) Value {
	if id == 0 {
		return Null
	}
	return Int(id)
}

// optional is *v, or NULL when v is nil.
func optional(v *int32) Value {
	if v == nil {
		return Null
	}
	return Int(*v)
}

// nullUnless is v when ok, else NULL.
func nullUnless(ok bool, v Value) Value {
	if !ok {
		return Null
	}
	return v
}
