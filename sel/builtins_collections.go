package sel

import "sort"

func newMap(st *state, p int, a []value) value {
	m := &mapObj{m: map[string]value{}}
	st.charge(p, 48)
	switch {
	case len(a) == 0:
	case len(a) == 1 && a[0].k == kMap:
		for k, v := range a[0].mp().m {
			m.m[k] = v
		}
		st.charge(p, int64(len(m.m))*64)
	case len(a) == 1 && a[0].k == kLong:
		// new HashMap(initialCapacity)
	default:
		st.fail(p, KindType, "no Map constructor for these arguments")
	}
	return value{k: kMap, o: m}
}

// arrayMethod implements contains (a Maestro extension), and the List
// methods that Arrays.asList(a) users call.
func (st *state) arrayMethod(e *callExpr, recv value, args []value) value {
	a := recv.arr()
	switch e.name {
	case "contains", "indexOf":
		if len(args) == 1 {
			for i, x := range a.v {
				if eq, ok := equalValues(x, args[0]); ok && eq || (isNum(x) && isNum(args[0]) && toF(x) == toF(args[0])) {
					if e.name == "contains" {
						return trueV
					}
					return longV(int64(i))
				}
			}
			if e.name == "contains" {
				return falseV
			}
			return longV(-1)
		}
	case "size":
		if len(args) == 0 {
			return longV(int64(len(a.v)))
		}
	case "isEmpty":
		if len(args) == 0 {
			return boolV(len(a.v) == 0)
		}
	case "get":
		if len(args) == 1 {
			return a.v[st.arrayIndex(e.p, a, args[0])]
		}
	case "toString":
		if len(args) == 0 {
			return strV(javaString(recv))
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}

func (st *state) mapKey(e *callExpr, v value) string {
	if v.k != kString {
		st.fail(e.p, KindType, "Map.%s: a key must be a String, found %s", e.name, v.typeName())
	}
	return v.s
}

// mapMethod implements Map<String, Object>: size, isEmpty, get,
// getOrDefault, containsKey, containsValue, put, remove and keySet (sorted).
func (st *state) mapMethod(e *callExpr, recv value, args []value) value {
	m := recv.mp()
	switch e.name {
	case "size":
		if len(args) == 0 {
			return longV(int64(len(m.m)))
		}
	case "isEmpty":
		if len(args) == 0 {
			return boolV(len(m.m) == 0)
		}
	case "get":
		if len(args) == 1 {
			if v, ok := m.m[st.mapKey(e, args[0])]; ok {
				return v
			}
			return nullV
		}
	case "getOrDefault":
		if len(args) == 2 {
			if v, ok := m.m[st.mapKey(e, args[0])]; ok {
				return v
			}
			return args[1]
		}
	case "containsKey":
		if len(args) == 1 {
			_, ok := m.m[st.mapKey(e, args[0])]
			return boolV(ok)
		}
	case "containsValue":
		if len(args) == 1 {
			for _, v := range m.m {
				if eq, ok := equalValues(v, args[0]); ok && eq {
					return trueV
				}
			}
			return falseV
		}
	case "put":
		if len(args) == 2 {
			k := st.mapKey(e, args[0])
			old, ok := m.m[k]
			if !ok {
				old = nullV
				st.charge(e.p, int64(len(k))+64)
			}
			m.m[k] = args[1]
			return old
		}
	case "remove":
		if len(args) == 1 {
			k := st.mapKey(e, args[0])
			old, ok := m.m[k]
			if !ok {
				return nullV
			}
			delete(m.m, k)
			return old
		}
	case "keySet":
		if len(args) == 0 {
			keys := make([]string, 0, len(m.m))
			for k := range m.m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			arr := st.newArray(e.p, kString, int64(len(keys)))
			for i, k := range keys {
				arr.v[i] = strV(k)
			}
			return value{k: kArray, o: arr}
		}
	case "toString":
		if len(args) == 0 {
			return strV(javaString(recv))
		}
	}
	st.noMethod(e, recv, args)
	return nullV
}
