package manager

import (
	"context"
	"errors"
	"time"

	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
)

// epRun serves run-start and run-resume on the ep rails (the reference's
// manager-service-contract RUN_START / RUN_RESUME): the manager validates and drives the
// run and answers its id. timeout is the default checkpoint timeout of the drive.
func (m *Manager) epRun(s mgrclient.EPSubject, r mgrclient.EPRequest) (any, error) {
	command := s.Command
	var a struct {
		Source  *string `json:"source"`
		File    *string `json:"file"`
		RunID   *string `json:"runId"`
		Timeout *string `json:"timeout"`
	}
	if err := epArgs(r, &a); err != nil {
		return nil, err
	}
	var timeout time.Duration
	if a.Timeout != nil {
		ms, err := lang.ParseDuration(*a.Timeout)
		if err != nil || ms <= 0 {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "args.timeout %q: want a duration such as 1h", *a.Timeout)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	h := m.runs()
	if h == nil {
		return nil, mgrclient.EPFail(mgrclient.EPUnavailable, "this manager hosts no runs: its run store is not open (see its log)")
	}
	if command == "run-start" {
		if a.Source == nil || *a.Source == "" || a.RunID != nil {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "run-start takes {source, file?, timeout?}")
		}
		prog, run, err := rundriver.Prepare(*a.Source)
		if err != nil {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "the program is refused: %v", err)
		}
		file := ""
		if a.File != nil {
			file = *a.File
		}
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		defer cancel()
		if err := h.admit(ctx, run, s.Caller, s.UID); err != nil {
			return nil, mgrclient.EPFail(mgrclient.EPUnavailable, "admit run %s: %v", run, err)
		}
		err = h.launch(run, func(ctx context.Context, cfg rundriver.Config) (rundriver.Outcome, error) {
			cfg.CheckpointTimeout = timeout
			return rundriver.Start(ctx, cfg, prog, run, file)
		})
		if err != nil {
			return nil, mgrclient.EPFail(mgrclient.EPInternal, "%v", err)
		}
		return map[string]string{"runId": run}, nil
	}
	if a.RunID == nil || a.Source != nil || a.File != nil {
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "run-resume takes {runId, timeout?}: the manager resumes the recorded program")
	}
	run := *a.RunID
	if err := runstore.CheckID("run id", run); err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "%v", err)
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	recs, err := runstore.OpenRecords(ctx, h.js, m.Space)
	if err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPUnavailable, "%v", err)
	}
	var spec runstore.RunSpec
	if _, err := recs.Get(ctx, runstore.RunSpecKey(runstore.DefaultEndpoint, run), &spec); errors.Is(err, runstore.ErrNoRecord) {
		return nil, mgrclient.EPFail(mgrclient.EPNotFound, "no run %s on endpoint %s", run, runstore.DefaultEndpoint)
	} else if err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPInternal, "%v", err)
	}
	var prog runstore.Program
	if _, err := recs.Get(ctx, runstore.ProgramKey(runstore.DefaultEndpoint, run), &prog); err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPFailedPrecondition, "run %s has no recorded program; resume it with cotal run resume %s --local --file <program>", run, run)
	}
	if why := h.revoked(ctx, run); why != "" {
		return nil, mgrclient.EPFail(mgrclient.EPPermissionDenied, "run %s: %s; a revoked run is not resumed", run, why)
	}
	err = h.launch(run, func(ctx context.Context, cfg rundriver.Config) (rundriver.Outcome, error) {
		cfg.CheckpointTimeout = timeout
		return rundriver.Resume(ctx, cfg, run)
	})
	if errors.Is(err, ErrRunDriven) {
		return nil, mgrclient.EPFail(mgrclient.EPConflict, "run %s is already driven by this manager", run)
	}
	if err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPInternal, "%v", err)
	}
	return map[string]string{"runId": run}, nil
}
