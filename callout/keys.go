package callout

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/nacl/box"
)

// MaxServerKeys bounds how many server xkeys a Responder keeps a shared key for; the least
// recently used one is dropped first.
const MaxServerKeys = 64

const (
	xkeyVersion = nkeys.XKeyVersionV1 // "xkv1", the nkeys curve framing
	nonceLen    = 24
	headerLen   = len(xkeyVersion) + nonceLen
)

// errUnsealed means a payload is not in the nkeys xkv1 framing or does not open.
var errUnsealed = errors.New("payload does not open")

// keyCache derives the X25519 shared key with a server xkey once and keeps at most
// MaxServerKeys of them. It seals and opens in the nkeys xkv1 format ("xkv1" + 24-byte
// nonce + NaCl box), so nkeys curve keys on the other side interoperate byte for byte.
type keyCache struct {
	priv [32]byte // our curve private key
	keys *lru.Cache[string, *[32]byte]
}

// newKeyCache returns a cache for the curve key pair kp (prefix X).
func newKeyCache(kp nkeys.KeyPair) (*keyCache, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("xkey seed: %w", err)
	}
	prefix, raw, err := nkeys.DecodeSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("xkey seed: %w", err)
	}
	if prefix != nkeys.PrefixByteCurve || len(raw) != 32 {
		return nil, fmt.Errorf("xkey seed: %w", nkeys.ErrInvalidCurveSeed)
	}
	keys, err := lru.New[string, *[32]byte](MaxServerKeys)
	if err != nil {
		return nil, fmt.Errorf("xkey cache: %w", err)
	}
	c := &keyCache{keys: keys}
	copy(c.priv[:], raw)
	return c, nil
}

// shared returns the shared key with the server xkey pub and whether it came from the
// cache. A derived key is not cached: call keep once the request passed every check.
func (c *keyCache) shared(pub string) (*[32]byte, bool, error) {
	if k, ok := c.keys.Get(pub); ok {
		return k, true, nil
	}
	raw, err := nkeys.Decode(nkeys.PrefixByteCurve, []byte(pub))
	if err != nil {
		return nil, false, fmt.Errorf("server xkey %q: %w", pub, err)
	}
	if len(raw) != 32 {
		return nil, false, fmt.Errorf("server xkey %q: %w", pub, nkeys.ErrInvalidCurveKey)
	}
	var peer [32]byte
	copy(peer[:], raw)
	k := new([32]byte)
	box.Precompute(k, &peer, &c.priv)
	return k, false, nil
}

// keep caches the shared key k for pub.
func (c *keyCache) keep(pub string, k *[32]byte) { c.keys.Add(pub, k) }

// len is the number of cached server keys.
func (c *keyCache) len() int { return c.keys.Len() }

// open opens an xkv1 payload sealed with the shared key k.
func open(k *[32]byte, in []byte) ([]byte, error) {
	if len(in) <= headerLen || !bytes.Equal(in[:len(xkeyVersion)], []byte(xkeyVersion)) {
		return nil, errUnsealed
	}
	var nonce [nonceLen]byte
	copy(nonce[:], in[len(xkeyVersion):headerLen])
	out, ok := box.OpenAfterPrecomputation(nil, in[headerLen:], &nonce, k)
	if !ok {
		return nil, errUnsealed
	}
	return out, nil
}

// seal seals msg with the shared key k in the xkv1 format, with a random nonce.
func seal(k *[32]byte, msg []byte) ([]byte, error) {
	var nonce [nonceLen]byte
	if _, err := io.ReadFull(rand.Reader, nonce[:]); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	out := make([]byte, headerLen, headerLen+len(msg)+box.Overhead)
	copy(out, xkeyVersion)
	copy(out[len(xkeyVersion):], nonce[:])
	return box.SealAfterPrecomputation(out, msg, &nonce, k), nil
}
