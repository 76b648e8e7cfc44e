package backup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// chunkSize is the size of one restore chunk, and the snapshot chunk size asked for.
const chunkSize = 128 << 10

// requestTimeout bounds one request to the JetStream API or one upload chunk.
const requestTimeout = 30 * time.Second

// request sends one request and waits for its reply, at most requestTimeout.
func request(ctx context.Context, nc *nats.Conn, subject string, data []byte) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return nc.RequestWithContext(ctx, subject, data)
}

// apiError is the error object of a JetStream API response.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) err() error {
	if e == nil {
		return nil
	}
	return fmt.Errorf("JetStream: %s (code %d, err_code %d)", e.Description, e.Code, e.ErrCode)
}

// streamState is the part of a stream's state a backup records.
type streamState struct {
	Msgs      uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Consumers int    `json:"consumer_count"`
}

// snapshot streams JetStream's snapshot of stream, with its consumers, into w through
// the server's own API ($JS.API.STREAM.SNAPSHOT), acknowledging each chunk as the server
// asks, and returns the stream's state at the cut.
func snapshot(ctx context.Context, nc *nats.Conn, stream string, w io.Writer) (streamState, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return streamState{}, fmt.Errorf("snapshot %s: subscribe: %w", stream, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection may be closing
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return streamState{}, fmt.Errorf("snapshot %s: %w", stream, err)
	}
	if err := nc.FlushTimeout(requestTimeout); err != nil {
		return streamState{}, fmt.Errorf("snapshot %s: %w", stream, err)
	}
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "chunk_size": chunkSize})
	msg, err := request(ctx, nc, "$JS.API.STREAM.SNAPSHOT."+stream, req)
	if err != nil {
		return streamState{}, fmt.Errorf("snapshot %s: %w", stream, err)
	}
	var resp struct {
		Error *apiError   `json:"error"`
		State streamState `json:"state"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return streamState{}, fmt.Errorf("snapshot %s: decode the reply: %w", stream, err)
	}
	if err := resp.Error.err(); err != nil {
		return streamState{}, fmt.Errorf("snapshot %s: %w", stream, err)
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return streamState{}, fmt.Errorf("snapshot %s: %w", stream, err)
		}
		if st := m.Header.Get("Status"); st != "" && st != "204" {
			return streamState{}, fmt.Errorf("snapshot %s: the server stopped it: %s %s", stream, st, m.Header.Get("Description"))
		}
		if len(m.Data) == 0 {
			return resp.State, nil // the end of the snapshot
		}
		if _, err := w.Write(m.Data); err != nil {
			return streamState{}, fmt.Errorf("snapshot %s: %w", stream, err)
		}
		if m.Reply != "" {
			if err := m.Respond(nil); err != nil {
				return streamState{}, fmt.Errorf("snapshot %s: acknowledge a chunk: %w", stream, err)
			}
		}
	}
}

// restoreStream creates stream cfg from a snapshot read from r through the server's
// restore API ($JS.API.STREAM.RESTORE): the stream takes cfg, never the config the
// snapshot carries. A read error from r (a checksum that does not match) stops the upload
// before its final empty chunk, so the server creates nothing.
func restoreStream(ctx context.Context, nc *nats.Conn, cfg jetstream.StreamConfig, r io.Reader) (streamState, error) {
	req, err := json.Marshal(map[string]any{"config": cfg})
	if err != nil {
		return streamState{}, fmt.Errorf("restore %s: %w", cfg.Name, err)
	}
	msg, err := request(ctx, nc, "$JS.API.STREAM.RESTORE."+cfg.Name, req)
	if err != nil {
		return streamState{}, fmt.Errorf("restore %s: %w", cfg.Name, err)
	}
	var resp struct {
		Error   *apiError `json:"error"`
		Deliver string    `json:"deliver_subject"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return streamState{}, fmt.Errorf("restore %s: decode the reply: %w", cfg.Name, err)
	}
	if err := resp.Error.err(); err != nil {
		return streamState{}, fmt.Errorf("restore %s: %w", cfg.Name, err)
	}
	if !strings.HasPrefix(resp.Deliver, "$JS.SNAPSHOT.RESTORE."+cfg.Name+".") {
		return streamState{}, fmt.Errorf("restore %s: the server named an unexpected upload subject %q", cfg.Name, resp.Deliver)
	}
	br := bufio.NewReaderSize(r, chunkSize)
	buf := make([]byte, chunkSize)
	for {
		n, err := io.ReadFull(br, buf)
		if n > 0 {
			ack, rerr := request(ctx, nc, resp.Deliver, buf[:n])
			if rerr != nil {
				return streamState{}, fmt.Errorf("restore %s: upload: %w", cfg.Name, rerr)
			}
			if len(ack.Data) > 0 {
				var e struct {
					Error *apiError `json:"error"`
				}
				if json.Unmarshal(ack.Data, &e) == nil && e.Error != nil {
					return streamState{}, fmt.Errorf("restore %s: %w", cfg.Name, e.Error.err())
				}
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return streamState{}, fmt.Errorf("restore %s: %w", cfg.Name, err)
		}
	}
	fin, err := request(ctx, nc, resp.Deliver, nil)
	if err != nil {
		return streamState{}, fmt.Errorf("restore %s: finish: %w", cfg.Name, err)
	}
	var done struct {
		Error *apiError `json:"error"`
		State struct {
			Msgs      uint64 `json:"messages"`
			Bytes     uint64 `json:"bytes"`
			FirstSeq  uint64 `json:"first_seq"`
			LastSeq   uint64 `json:"last_seq"`
			Consumers int    `json:"consumer_count"`
		} `json:"state"`
	}
	if err := json.Unmarshal(fin.Data, &done); err != nil {
		return streamState{}, fmt.Errorf("restore %s: decode the final reply: %w", cfg.Name, err)
	}
	if err := done.Error.err(); err != nil {
		return streamState{}, fmt.Errorf("restore %s: %w", cfg.Name, err)
	}
	return streamState(done.State), nil
}
