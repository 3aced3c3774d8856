package workflow

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// binder fills Go values from a node tree strictly: every unknown field and every value of the
// wrong JSON type is reported with its path, and binding carries on so all problems are found in
// one pass.
//
// Struct fields are matched by their json tag name. Two extra struct tags steer it:
//
//	wf:"extra"  a map[string]json.RawMessage that receives fields the struct does not declare
//	wf:"skip"   a declared field left for the type's postBind hook
//
// A type whose pointer implements nodeBinder decodes itself; one that implements postBinder is
// bound field by field first and then finishes the job.
type binder struct {
	problems
}

type nodeBinder interface {
	bindNode(b *binder, n *node, path string)
}

type postBinder interface {
	postBind(b *binder, n *node, path string)
}

// normalizer is implemented by enum types that canonicalise their spelling after decoding
// (Maestro's enums are case-insensitive on input).
type normalizer interface {
	normalize()
}

var (
	nodeBinderType = reflect.TypeFor[nodeBinder]()
	postBinderType = reflect.TypeFor[postBinder]()
	normalizerType = reflect.TypeFor[normalizer]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
)

type fieldInfo struct {
	index []int
	skip  bool
}

type structInfo struct {
	fields map[string]fieldInfo
	extra  []int // index of the wf:"extra" field, or nil
}

var structCache sync.Map // reflect.Type -> *structInfo

func structInfoOf(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{fields: map[string]fieldInfo{}}
	collectFields(t, nil, si)
	actual, _ := structCache.LoadOrStore(t, si)
	return actual.(*structInfo)
}

func collectFields(t reflect.Type, prefix []int, si *structInfo) {
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(append([]int(nil), prefix...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			collectFields(f.Type, idx, si)
			continue
		}
		if !f.IsExported() {
			continue
		}
		wf := f.Tag.Get("wf")
		if wf == "extra" {
			si.extra = idx
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		si.fields[name] = fieldInfo{index: idx, skip: wf == "skip"}
	}
}

// expect reports a type mismatch unless n has the wanted kind.
func (b *binder) expect(n *node, want nodeKind, path string) bool {
	if n.kind == want {
		return true
	}
	b.addf(path, "expected %s, got %s%s", article(want), n.kind, n.pos())
	return false
}

func article(k nodeKind) string {
	switch k {
	case kindArray, kindObject:
		return "an " + k.String()
	}
	return "a " + k.String()
}

// bind decodes n into v, which must be settable.
func (b *binder) bind(n *node, v reflect.Value, path string) {
	if n == nil || n.kind == kindNull {
		v.SetZero()
		return
	}
	if v.CanAddr() {
		if pv := v.Addr(); pv.Type().Implements(nodeBinderType) {
			pv.Interface().(nodeBinder).bindNode(b, n, path)
			return
		}
	}
	t := v.Type()
	if t == rawMessageType {
		v.SetBytes(n.rawJSON())
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		nv := reflect.New(t.Elem())
		b.bind(n, nv.Elem(), path)
		v.Set(nv)
	case reflect.String:
		if b.expect(n, kindString, path) {
			v.SetString(n.text)
			if pv := v.Addr(); pv.Type().Implements(normalizerType) {
				pv.Interface().(normalizer).normalize()
			}
		}
	case reflect.Bool:
		if b.expect(n, kindBool, path) {
			v.SetBool(n.b)
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		if i, ok := b.integer(n, path); ok {
			if v.OverflowInt(i) {
				b.addf(path, "integer %d is out of range%s", i, n.pos())
				return
			}
			v.SetInt(i)
		}
	case reflect.Float64:
		if b.expect(n, kindNumber, path) {
			f, err := strconv.ParseFloat(n.text, 64)
			if err != nil || math.IsInf(f, 0) {
				b.addf(path, "number %s is out of range%s", n.text, n.pos())
				return
			}
			v.SetFloat(f)
		}
	case reflect.Slice:
		if !b.expect(n, kindArray, path) {
			return
		}
		s := reflect.MakeSlice(t, len(n.items), len(n.items))
		for i, it := range n.items {
			b.bind(it, s.Index(i), joinIndex(path, i))
		}
		v.Set(s)
	case reflect.Map:
		if !b.expect(n, kindObject, path) {
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.keys))
		for i, k := range n.keys {
			ev := reflect.New(t.Elem()).Elem()
			b.bind(n.vals[i], ev, joinKey(path, k))
			m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		v.Set(m)
	case reflect.Struct:
		b.bindStruct(n, v, path)
	case reflect.Interface:
		v.Set(reflect.ValueOf(n.toAny()))
	default:
		b.addf(path, "cannot decode into %s", t)
	}
}

// integer reads an integral JSON number.
func (b *binder) integer(n *node, path string) (int64, bool) {
	if !b.expect(n, kindNumber, path) {
		return 0, false
	}
	i, err := strconv.ParseInt(n.text, 10, 64)
	if err != nil {
		if strings.ContainsAny(n.text, ".eE") {
			b.addf(path, "expected an integer, got %s%s", n.text, n.pos())
		} else {
			b.addf(path, "integer %s is out of range%s", n.text, n.pos())
		}
		return 0, false
	}
	return i, true
}

// bindStruct binds an object node field by field.
func (b *binder) bindStruct(n *node, v reflect.Value, path string) {
	if !b.expect(n, kindObject, path) {
		return
	}
	si := structInfoOf(v.Type())
	for i, k := range n.keys {
		child := joinKey(path, k)
		fi, ok := si.fields[k]
		switch {
		case ok && fi.skip:
		case ok:
			b.bind(n.vals[i], v.FieldByIndex(fi.index), child)
		case si.extra != nil:
			ev := v.FieldByIndex(si.extra)
			if ev.IsNil() {
				ev.Set(reflect.MakeMap(ev.Type()))
			}
			ev.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(n.vals[i].rawJSON()))
		default:
			b.add(child, "unknown field"+n.vals[i].pos())
		}
	}
	if pv := v.Addr(); pv.Type().Implements(postBinderType) {
		pv.Interface().(postBinder).postBind(b, n, path)
	}
}

// bindInto decodes n into the value ptr points at.
func (b *binder) bindInto(n *node, ptr any, path string) {
	b.bind(n, reflect.ValueOf(ptr).Elem(), path)
}

// decodeStrict parses data as JSON and binds it into ptr.
func decodeStrict(data []byte, ptr any, path string) error {
	root, probs := parseJSON(data)
	var b binder
	b.list = append(b.list, probs...)
	if root != nil {
		b.bindInto(root, ptr, path)
	}
	return b.err()
}

// reflectValueOf returns the settable value ptr points at.
func reflectValueOf(ptr any) reflect.Value { return reflect.ValueOf(ptr).Elem() }
