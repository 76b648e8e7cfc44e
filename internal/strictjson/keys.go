package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// checkKeys walks the JSON value raw alongside the Go type t it was decoded into and
// refuses what encoding/json lets through: an object key that names a field only when
// letter case is ignored, and a key given twice. path names the value in messages.
func checkKeys(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if pt := reflect.PointerTo(t); pt.Implements(reflect.TypeFor[json.Unmarshaler]()) || pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return nil // a type that decodes itself judges its own insides
	}
	switch t.Kind() {
	case reflect.Struct:
		keys, vals, ok := object(raw)
		if !ok {
			return nil // null, or not an object: the decoder judged it
		}
		fields := fieldsOf(t)
		for i, k := range keys {
			ft, found := fields[k]
			if !found {
				return fmt.Errorf("%s: unknown field %q (keys are case-sensitive)", path, k)
			}
			if err := checkKeys(vals[i], ft, path+"."+k); err != nil {
				return err
			}
		}
	case reflect.Map:
		keys, vals, ok := object(raw)
		if !ok {
			return nil
		}
		for i, k := range keys {
			if err := checkKeys(vals[i], t.Elem(), path+"."+k); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte and json.RawMessage
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, it := range items {
			if err := checkKeys(it, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// object returns the keys of the JSON object raw in order, with their values; ok is false
// when raw is not an object. A key given twice comes back the second time with a suffix no
// field name has, so the caller refuses it as unknown.
func object(raw []byte) (keys []string, vals []json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		if seen[k] {
			k = k + " (given twice)"
		}
		seen[k] = true
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, true
}

// fieldsOf maps the JSON names of struct type t's fields (embedded structs flattened) to
// their types, as encoding/json names them.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					if _, shadowed := out[k]; !shadowed {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
