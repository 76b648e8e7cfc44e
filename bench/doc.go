// Package bench measures cotal against raw NATS on one embedded server. Every benchmark
// reports a ratio against a baseline measured in the same run, because absolute times on
// shared machines are noise. Run: go test -run '^$' -bench . -benchtime 5x ./bench/
package bench
