package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/protocol"
)

// identityFile records the lifecycle uid of one agent of a space, so every credential
// minted for it names the same DM durable and history reader.
type identityFile struct {
	Version      int    `json:"version"`
	Space        string `json:"space"`
	Actor        string `json:"actor"`
	LifecycleUID string `json:"lifecycleUid"`
}

// Identity returns the lifecycle uid of actor on space, minting and recording it on first
// use (<dir>/space.<hex>/agents/<actor>.json, create-only). The same actor keeps its uid
// across restarts, so messages waiting in its DM durable are never orphaned.
func (c *Chain) Identity(space, actor string) (string, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return "", fmt.Errorf("identity: %w", err)
	}
	if !protocol.ValidActor(actor) {
		return "", fmt.Errorf("identity %q: not an actor token (1 to %d of A-Z a-z 0-9 _)", actor, protocol.MaxActorLength)
	}
	dir := filepath.Join(c.dir, "space."+protocol.SpaceKey(space), "agents")
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return "", fmt.Errorf("identity %q: %w", actor, err)
	}
	path := filepath.Join(dir, actor+".json")
	repair := "move it aside to give the agent a new identity (its waiting DMs stay in the old durable)"
	var f identityFile
	err := readFile(path, &f, repair)
	if errors.Is(err, fs.ErrNotExist) {
		fresh := identityFile{Version: fileVersion, Space: space, Actor: actor, LifecycleUID: protocol.NewLifecycleUID()}
		switch err = createFile(path, fresh); {
		case errors.Is(err, errExists):
			err = readFile(path, &f, repair)
		case err == nil:
			f = fresh
		}
	}
	if err != nil {
		return "", fmt.Errorf("identity %q: %w", actor, err)
	}
	if f.Space != space || f.Actor != actor || !protocol.ValidLifecycleUID(f.LifecycleUID) {
		return "", fmt.Errorf("identity %q: %w", actor, corrupt(path, "it names another agent or has no valid lifecycle uid", repair))
	}
	return f.LifecycleUID, nil
}
