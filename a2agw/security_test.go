package a2agw_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/a2agw"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// TestBucketOnlyForTheGateway attacks through the same door: an ordinary agent's real
// minted credential on a raw nats.go connection tries to read and write the gateway's
// task bucket.
func TestBucketOnlyForTheGateway(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "bob")
	go answer(t, bob, "ok")
	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("hi")}))

	eve := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "eve"}
	nc := m.Connect(m.Mint(space, trust.UserSpec{Name: "eve", Profile: trust.ProfileAgent, Principal: eve,
		LifecycleUID: protocol.NewLifecycleUID(), Subscribe: []string{"general"}, AllowPublish: []string{"general"}}))
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	bucket := protocol.BucketA2A(space)
	if kv, err := js.KeyValue(ctx, bucket); err == nil {
		if _, err := kv.Get(ctx, "task."+tk.ID); err == nil {
			t.Fatal("eve read a task of the gateway")
		}
	}
	for what, msg := range map[string]*nats.Msg{
		"overwrite": {Subject: "$KV." + bucket + ".task." + tk.ID, Data: []byte(`{}`)},
		"index":     {Subject: "$KV." + bucket + ".ask.x", Data: []byte(tk.ID)},
	} {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			t.Fatalf("eve's %s of the gateway's bucket was stored", what)
		}
	}
	// A raw Direct Get and a raw subscription to the bucket's subjects are refused too.
	if msg, err := nc.Request("$JS.API.DIRECT.GET.KV_"+bucket+".$KV."+bucket+".task."+tk.ID, nil, 2*time.Second); err == nil && len(msg.Data) > 0 && msg.Header.Get("Status") == "" {
		t.Fatalf("eve's direct get answered %s", msg.Data)
	}
	got := task(t, call(t, g.srv.URL, "bob", "tasks/get", map[string]any{"id": tk.ID}))
	if got.Status.State != a2agw.StateCompleted {
		t.Fatalf("task after the attack %+v", got)
	}
}

// TestPushNotifications: the task goes to a loopback webhook with its token at each
// change; a redirect is not followed; an address off loopback is refused.
func TestPushNotifications(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "bob")

	var mu sync.Mutex
	var states []string
	var tokens []string
	var followed bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		followed = true
		mu.Unlock()
	}))
	defer elsewhere.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var tk a2agw.Task
		_ = json.Unmarshal(b, &tk)
		mu.Lock()
		states = append(states, tk.Status.State)
		tokens = append(tokens, r.Header.Get("X-A2A-Notification-Token"))
		mu.Unlock()
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	defer hook.Close()

	for _, bad := range []string{"http://10.0.0.1/hook", "http://example.com/hook", "file:///tmp/x", "http://user:pw@127.0.0.1/"} {
		r := call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("x"),
			"configuration": map[string]any{"blocking": false, "pushNotificationConfig": map[string]any{"url": bad}}})
		if r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("push url %s: %+v", bad, r)
		}
	}
	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("job"),
		"configuration": map[string]any{"blocking": false}}))
	set := call(t, g.srv.URL, "bob", "tasks/pushNotificationConfig/set", map[string]any{"taskId": tk.ID,
		"pushNotificationConfig": map[string]any{"url": hook.URL + "/hook", "token": "t0k"}})
	if set.Error != nil {
		t.Fatalf("set: %+v", set.Error)
	}
	get := call(t, g.srv.URL, "bob", "tasks/pushNotificationConfig/get", map[string]any{"id": tk.ID})
	var cfg a2agw.TaskPushConfig
	if get.Error != nil || json.Unmarshal(get.Result, &cfg) != nil || cfg.PushConfig.URL != hook.URL+"/hook" {
		t.Fatalf("get: %s %+v", get.Result, get.Error)
	}
	answer(t, bob, "done")
	meshtest.Until(t, "the completed task pushed", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(states) > 0 && states[len(states)-1] == a2agw.StateCompleted
	})
	mu.Lock()
	defer mu.Unlock()
	if followed || tokens[0] != "t0k" {
		t.Fatalf("redirect followed %v, tokens %v", followed, tokens)
	}
}

// TestRemotePushNeverLocal: a gateway serving remote callers refuses a webhook on this
// machine's own addresses, so a caller from elsewhere cannot reach its local services.
func TestRemotePushNeverLocal(t *testing.T) {
	m := mesh(t)
	peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), func(c *a2agw.Config) { c.AllowRemotePush = true }, "bob")
	for _, bad := range []string{"http://127.0.0.1:7799/api/post", "http://localhost:4222/", "http://[::1]:80/", "http://0.0.0.0:80/", "http://169.254.169.254/latest"} {
		r := call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("x"),
			"configuration": map[string]any{"blocking": false, "pushNotificationConfig": map[string]any{"url": bad}}})
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "this machine's own addresses") {
			t.Fatalf("push url %s on a remote gateway: %+v", bad, r)
		}
	}
}
