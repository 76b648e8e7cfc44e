package bytesize

import "testing"

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0B", 1500: "1500B", 1 << 10: "1KiB", 250 << 10: "250KiB", 1536 << 10: "1536KiB",
		512 << 20: "512MiB", 1 << 30: "1GiB", 3 << 40: "3TiB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
