package callout

import (
	"bytes"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

func curveKeys(t testing.TB) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateCurveKeys()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return kp, pub
}

// TestSealInterop: what nkeys seals the cache opens, and what the cache seals nkeys opens,
// in both directions and byte for byte in the xkv1 framing.
func TestSealInterop(t *testing.T) {
	ours, ourPub := curveKeys(t)
	srv, srvPub := curveKeys(t)
	cache, err := newKeyCache(ours)
	if err != nil {
		t.Fatal(err)
	}
	k, cached, err := cache.shared(srvPub)
	if err != nil || cached {
		t.Fatalf("shared: cached %v, err %v", cached, err)
	}
	msg := []byte("an authorization request")

	// nkeys seals (server side), the cache opens.
	sealed, err := srv.Seal(msg, ourPub)
	if err != nil {
		t.Fatal(err)
	}
	got, err := open(k, sealed)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("cache open of nkeys seal: %q, %v", got, err)
	}

	// The cache seals, nkeys opens.
	out, err := seal(k, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte("xkv1")) || len(out) != 4+24+len(msg)+16 {
		t.Fatalf("sealed framing: len %d, prefix %q", len(out), out[:4])
	}
	got, err = srv.Open(out, ourPub)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("nkeys open of cache seal: %q, %v", got, err)
	}

	// The other direction of the pair: the cache as the server, nkeys as the callout.
	srvCache, err := newKeyCache(srv)
	if err != nil {
		t.Fatal(err)
	}
	sk, _, err := srvCache.shared(ourPub)
	if err != nil {
		t.Fatal(err)
	}
	out, err = seal(sk, msg)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = ours.Open(out, srvPub); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("nkeys open (reverse): %q, %v", got, err)
	}
	sealed, err = ours.Seal(msg, srvPub)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = open(sk, sealed); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("cache open (reverse): %q, %v", got, err)
	}

	// Garbage, a wrong version and a truncated box do not open.
	for _, bad := range [][]byte{nil, []byte("xkv1"), []byte("xkv2" + string(sealed[4:])), sealed[:len(sealed)-1]} {
		if _, err := open(sk, bad); err == nil {
			t.Fatalf("opened %q", bad)
		}
	}
	if cache.len() != 0 {
		t.Fatalf("shared alone cached a key: %d", cache.len())
	}
}

// BenchmarkOpenSeal compares one request's crypto (open the request, seal the response)
// with the cached shared key against nkeys' Open+Seal, which derive it twice.
func BenchmarkOpenSeal(b *testing.B) {
	ours, ourPub := curveKeys(b)
	srv, srvPub := curveKeys(b)
	cache, err := newKeyCache(ours)
	if err != nil {
		b.Fatal(err)
	}
	k, _, err := cache.shared(srvPub)
	if err != nil {
		b.Fatal(err)
	}
	cache.keep(srvPub, k)
	req := bytes.Repeat([]byte("r"), 1200) // about a request JWT
	resp := bytes.Repeat([]byte("s"), 1000)
	sealed, err := srv.Seal(req, ourPub)
	if err != nil {
		b.Fatal(err)
	}
	var cachedDur, derivedDur time.Duration
	for b.Loop() {
		t0 := time.Now()
		k, ok, err := cache.shared(srvPub)
		if err != nil || !ok {
			b.Fatal("not cached", err)
		}
		if _, err := open(k, sealed); err != nil {
			b.Fatal(err)
		}
		if _, err := seal(k, resp); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := ours.Open(sealed, srvPub); err != nil {
			b.Fatal(err)
		}
		if _, err := ours.Seal(resp, srvPub); err != nil {
			b.Fatal(err)
		}
		derivedDur += time.Since(t1)
		cachedDur += t1.Sub(t0)
	}
	b.ReportMetric(float64(cachedDur.Nanoseconds())/float64(b.N), "cached-ns/req")
	b.ReportMetric(float64(derivedDur.Nanoseconds())/float64(b.N), "nkeys-ns/req")
	b.ReportMetric(float64(derivedDur)/float64(cachedDur), "speedup")
}
