package web_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/web"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// authProject lays out a project whose authenticated mesh (operator-mode broker, the
// project's trust chain in .cotal/auth) serves space, as cotal up leaves it, and returns
// the project's root and the mesh.
func authProject(t *testing.T) (string, *meshtest.Mesh) {
	t.Helper()
	root := t.TempDir()
	proj, err := workspace.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Space(space); err != nil {
		t.Fatal(err)
	}
	m := meshtest.Serve(t, chain)
	m.Provision(space, provision.Options{DefaultDeliveryClass: "live"})
	if err := proj.WriteMesh(&workspace.Mesh{Server: m.URL, Mode: workspace.ModeAuth, Spaces: []string{space},
		StoreDir: t.TempDir(), Root: proj.Root, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return root, m
}

// TestPostsAsThePerson: on an authenticated mesh what the page posts carries the person at
// the keyboard's principal, and the connection it posts on holds that person's rights
// only: the broker refuses it JetStream administration and any other identity.
func TestPostsAsThePerson(t *testing.T) {
	root, m := authProject(t)
	_, person := cmdutil.OperatorIdentity() // the person at the keyboard: local.<login>
	bob := m.Mint(space, trust.UserSpec{Name: "bob", Profile: trust.ProfileAgent, Subscribe: []string{"general"},
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}, LifecycleUID: protocol.NewLifecycleUID()})
	bc, err := trust.ReadCreds(bob)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: space, Name: "bob", Actor: "bob", LifecycleUID: bc.LifecycleUID}, bc.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if err := ep.Listen(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		checks []string
	)
	wrap := func(o *web.Options) {
		orig := o.ConnectSender
		o.ConnectSender = func(ctx context.Context, tg cmdutil.Target) (*client.Endpoint, error) {
			ep, err := orig(ctx, tg)
			if err != nil {
				return nil, err
			}
			// What a provisioner's connection would let a page do: delete a stream,
			// create one, post as someone else. The broker refuses each.
			js := ep.JetStream()
			got := []string{
				denied(ep, "$JS.API.STREAM.DELETE", func(ctx context.Context) error {
					return js.DeleteStream(ctx, protocol.StreamChat(space))
				}),
				denied(ep, "$JS.API.STREAM.CREATE", func(ctx context.Context) error {
					_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EXFIL", Subjects: []string{"exfil.>"}})
					return err
				}),
				denied(ep, ".chat.local.bob.", func(ctx context.Context) error {
					forged := ep.Envelope(client.Text("forged"))
					forged.From.ID, forged.Channel = "local.bob", "general"
					_, err := ep.PublishAsync(protocol.ChatSubject(space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}, "general"), forged)
					if err == nil {
						err = ep.Conn().FlushWithContext(ctx)
					}
					return err
				}),
				"principal " + ep.Principal().String(),
			}
			mu.Lock()
			checks = append(checks, got...)
			mu.Unlock()
			return ep, nil
		}
	}
	base := launchWeb(t, root, wrap, "--server", m.URL)
	req, _ := http.NewRequest("POST", strings.TrimSuffix(base, "/")+"/api/post", strings.NewReader(`{"channel":"general","text":"from the dashboard"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("post: %d", res.StatusCode)
	}
	select {
	case in := <-ep.Messages():
		if in.Text() != "from the dashboard" || in.Subject.Sender.String() != "local."+person || in.Message.From.ID != "local."+person {
			t.Fatalf("bob got %q from %s (card %s), want the post from local.%s", in.Text(), in.Subject.Sender, in.Message.From.ID, person)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bob did not get the dashboard's post")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"refused", "refused", "refused", "principal local." + person}
	if strings.Join(checks, "|") != strings.Join(want, "|") {
		t.Fatalf("the dashboard's posting connection: %q, want %q", checks, want)
	}
	if _, err := m.Provisioner(space).Stream(t.Context(), protocol.StreamChat(space)); err != nil {
		t.Fatalf("the chat stream is gone: %v", err)
	}
}

// denied runs op on ep's connection and says "refused" when the broker refused a publish
// on a subject containing subject for it (nothing answers a refused request, so op fails
// or times out), or what happened otherwise.
func denied(ep *client.Endpoint, subject string, op func(context.Context) error) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := op(ctx)
	if lerr := ep.Conn().LastError(); lerr != nil && strings.Contains(lerr.Error(), "Permissions Violation for Publish") &&
		strings.Contains(lerr.Error(), subject) {
		return "refused"
	}
	if err == nil {
		return subject + ": accepted"
	}
	return subject + ": " + err.Error()
}
