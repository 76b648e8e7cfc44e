// Package strictjson decodes closed JSON documents: exactly one value, no field the target
// does not name (letter case counts, and no key twice), nothing after it. Every wire and
// file format of cotal that refuses unknown keys decodes through it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
)

// ErrTrailing is returned when data holds more than one JSON value.
var ErrTrailing = errors.New("trailing data after the JSON document")

// Decode decodes data, one JSON value, into v; a key v does not name exactly (encoding/json
// alone ignores letter case), a key given twice, or anything after the value is an error.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailing
	}
	return checkKeys(data, reflect.TypeOf(v), "$")
}
