package selfupdate

import (
	"context"
	"errors"
	"fmt"

	"github.com/cotal-ai/cotal/extension"
)

// Reinstaller reinstalls one extension from spec while the caller holds the prefix lock g,
// in a process of its own (see Child).
type Reinstaller func(ctx context.Context, g *extension.Guard, rec extension.Record, spec string) error

// Verdict is what the extension pass decides for one record.
type Verdict struct {
	Verified bool   // first-party and current: verified in place, not reinstalled
	Kept     bool   // third-party and intact: left as it is
	Why      string // why it is reinstalled, when neither
}

// Judge decides what the pass does with rec for a CLI at cliVersion. A first-party
// extension is verified when it is recorded at cliVersion, with the spec update installs,
// and its file is on disk with its recorded hash; a third-party one is kept when its file
// is intact (update does not move third-party extensions to new versions). Anything else
// is reinstalled, and Why says why: version differs, spec differs, file missing, hash
// differs.
func Judge(p *extension.Prefix, rec extension.Record, cliVersion string) (Verdict, error) {
	if rec.FirstParty {
		if rec.Version != cliVersion {
			return Verdict{Why: fmt.Sprintf("version differs: locked %s, cotal is %s", rec.Version, cliVersion)}, nil
		}
		if want := rec.UpdateSpec(cliVersion); want != rec.Spec {
			return Verdict{Why: fmt.Sprintf("spec differs: locked %s, update installs %s", rec.Spec, want)}, nil
		}
	}
	st, err := p.Check(rec)
	if err != nil {
		return Verdict{}, err
	}
	switch st {
	case extension.FileMissing:
		return Verdict{Why: "file missing: " + p.Path(rec)}, nil
	case extension.FileModified:
		return Verdict{Why: "hash differs: " + p.Path(rec) + " is not the sha256 the lock records"}, nil
	}
	if rec.FirstParty {
		return Verdict{Verified: true}, nil
	}
	return Verdict{Kept: true}, nil
}

// PassResult counts what the extension pass did.
type PassResult struct {
	Verified, Kept, Reinstalled, Failed int
}

// ErrReinstall reports that at least one reinstall did not succeed.
var ErrReinstall = errors.New("extension reinstall did not succeed")

// ExtensionPass runs the extension pass under the prefix lock: each extension is judged
// (Judge), verified or kept in this process, or reinstalled through reinstall after a line
// that says why; all is true reinstalls every one. A failed reinstall is reported and the
// pass goes on; the error then wraps ErrReinstall.
func ExtensionPass(ctx context.Context, p *extension.Prefix, cliVersion string, all bool, reinstall Reinstaller, say func(Note)) (PassResult, error) {
	var res PassResult
	g, err := p.Lock(ctx)
	if err != nil {
		return res, fmt.Errorf("extension pass: %w", err)
	}
	defer g.Release()
	if err := p.Sweep(g); err != nil {
		return res, fmt.Errorf("extension pass: %w", err)
	}
	lf, err := p.ReadLockfile()
	if err != nil {
		return res, fmt.Errorf("extension pass: %w", err)
	}
	if len(lf.Extensions) == 0 {
		say(Note{"✓", "operator extensions: none installed"})
		return res, g.Release()
	}
	for _, rec := range lf.Extensions {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("extension pass: %w", err)
		}
		v := Verdict{Why: "--reinstall asks for every extension"}
		if !all {
			if v, err = Judge(p, rec, cliVersion); err != nil {
				return res, fmt.Errorf("extension pass: %s: %w", rec.Name, err)
			}
		}
		switch {
		case v.Verified:
			res.Verified++
			say(Note{"✓", fmt.Sprintf("%s@%s verified (first-party, %s)", rec.Name, rec.Version, rec.Spec)})
			continue
		case v.Kept:
			res.Kept++
			say(Note{"✓", fmt.Sprintf("%s@%s intact (third-party, not moved by update; spec %s)", rec.Name, rec.Version, rec.Spec)})
			continue
		}
		spec := rec.UpdateSpec(cliVersion)
		say(Note{"↻", fmt.Sprintf("%s@%s reinstalling from %s: %s", rec.Name, rec.Version, spec, v.Why)})
		if reinstall == nil {
			res.Failed++
			say(Note{"✗", rec.Name + ": no way to reinstall"})
			continue
		}
		if err := reinstall(ctx, g, rec, spec); err != nil {
			res.Failed++
			say(Note{"✗", fmt.Sprintf("%s: %v", rec.Name, err)})
			continue
		}
		now, err := p.ReadLockfile()
		if err != nil {
			return res, fmt.Errorf("extension pass: %w", err)
		}
		got, ok := now.Find(rec.Name)
		if !ok {
			res.Failed++
			say(Note{"✗", rec.Name + ": the reinstall left no record"})
			continue
		}
		res.Reinstalled++
		say(Note{"✓", fmt.Sprintf("%s@%s reinstalled", got.Name, got.Version)})
		if got.FirstParty && got.Version != cliVersion {
			say(Note{"!", fmt.Sprintf("%s is at %s, not cotal's %s: install a current build with `cotal ext add --reinstall --first-party <path>`", got.Name, got.Version, cliVersion)})
		}
	}
	if err := g.Release(); err != nil {
		return res, err
	}
	if res.Failed > 0 {
		return res, fmt.Errorf("%w: %d of %d", ErrReinstall, res.Failed, len(lf.Extensions))
	}
	return res, nil
}
