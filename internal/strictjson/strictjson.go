// Package strictjson decodes closed JSON documents: exactly one value, no field the target
// does not name, nothing after it. Every wire and file format of cotal that refuses unknown
// keys decodes through it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailing is returned when data holds more than one JSON value.
var ErrTrailing = errors.New("trailing data after the JSON document")

// Decode decodes data, one JSON value, into v; a field v does not name, or anything after
// the value, is an error.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailing
	}
	return nil
}
