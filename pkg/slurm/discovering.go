package slurm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Discovering is a Client that speaks the newest API version both it and the slurmrestd
// serve (or cfg.APIVersion, when set). It asks slurmrestd once, at its first request, not
// when it is built: a client is built before its slurmrestd answers (a new cluster), and
// under the locks of whoever keeps it. It asks again only when slurmrestd answers that the
// version is not served (ErrVersionNotServed: slurmrestd was upgraded or downgraded under
// it), and then repeats that one request, which slurmrestd did not act on. A configured
// version is never replaced: its ErrVersionNotServed is the caller's.
//
// An upgrade goes the other way unnoticed: slurmrestd 26.05 still serves v0.0.42, the newest
// of 24.11, so a client that discovered v0.0.42 would keep it (and lack what newer versions
// carry, such as topology_str) until its process restarts. A discovered version older than
// the newest this package knows is therefore re-checked at the first request after
// RecheckOlder has passed; a failed re-check keeps the current client.
type Discovering struct {
	cfg Config

	mu      sync.Mutex
	client  Client
	version string
	checked time.Time // when version was discovered or last re-checked
	now     func() time.Time
}

// RecheckOlder is how long a Discovering client keeps a discovered version that is older than
// the newest it knows before asking slurmrestd again (one GET /openapi/v3, about 0.9 MB).
const RecheckOlder = 5 * time.Minute

// NewDiscovering checks cfg as New does; nothing is sent yet.
func NewDiscovering(cfg Config) (*Discovering, error) {
	d := &Discovering{cfg: cfg, now: time.Now}
	if cfg.APIVersion == "" {
		if _, err := newCore(cfg); err != nil {
			return nil, err
		}
		return d, nil
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	d.client, d.version = c, cfg.APIVersion
	return d, nil
}

// APIVersion is the version the client speaks: the configured one, or the discovered one
// ("" before the first request).
func (d *Discovering) APIVersion() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version
}

// current returns the client, connecting first when there is none, and re-checking a
// discovered version older than the newest known (RecheckOlder). The lock is held across the
// discovery so that concurrent requests ask slurmrestd once.
func (d *Discovering) current(ctx context.Context) (Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		c, v, err := Connect(ctx, d.cfg)
		if err != nil {
			return nil, fmt.Errorf("slurm: choosing the REST API version: %w", err)
		}
		d.client, d.version, d.checked = c, v, d.now()
		return d.client, nil
	}
	if d.cfg.APIVersion == "" && d.version != newestVersion() && d.now().Sub(d.checked) >= RecheckOlder {
		d.checked = d.now()
		if c, v, err := Connect(ctx, d.cfg); err == nil && v != d.version {
			d.client, d.version = c, v
		}
	}
	return d.client, nil
}

// forget drops c if it is still the current client.
func (d *Discovering) forget(c Client) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == c {
		d.client, d.version = nil, ""
	}
}

// discovering runs op on the current client, and once more on a newly discovered one when
// slurmrestd no longer serves the current client's version.
func discovering[T any](d *Discovering, ctx context.Context, op func(Client) (T, error)) (T, error) {
	c, err := d.current(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := op(c)
	if !errors.Is(err, ErrVersionNotServed) || d.cfg.APIVersion != "" {
		return v, err
	}
	d.forget(c)
	if c, err = d.current(ctx); err != nil {
		var zero T
		return zero, err
	}
	return op(c)
}

func (d *Discovering) Ping(ctx context.Context) ([]ControllerPing, error) {
	return discovering(d, ctx, func(c Client) ([]ControllerPing, error) { return c.Ping(ctx) })
}

func (d *Discovering) Diag(ctx context.Context) (*Diag, error) {
	return discovering(d, ctx, func(c Client) (*Diag, error) { return c.Diag(ctx) })
}

func (d *Discovering) Reconfigure(ctx context.Context) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.Reconfigure(ctx) }))
}

func (d *Discovering) ListNodes(ctx context.Context, since time.Time) (*NodeList, error) {
	return discovering(d, ctx, func(c Client) (*NodeList, error) { return c.ListNodes(ctx, since) })
}

func (d *Discovering) GetNode(ctx context.Context, name string) (*Node, error) {
	return discovering(d, ctx, func(c Client) (*Node, error) { return c.GetNode(ctx, name) })
}

func (d *Discovering) UpdateNode(ctx context.Context, name string, u NodeUpdate) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.UpdateNode(ctx, name, u) }))
}

func (d *Discovering) DeleteNode(ctx context.Context, name string) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.DeleteNode(ctx, name) }))
}

func (d *Discovering) SubmitJob(ctx context.Context, j JobSubmit) (*SubmitResult, error) {
	return discovering(d, ctx, func(c Client) (*SubmitResult, error) { return c.SubmitJob(ctx, j) })
}

func (d *Discovering) AllocateJob(ctx context.Context, j JobSubmit) (*SubmitResult, error) {
	return discovering(d, ctx, func(c Client) (*SubmitResult, error) { return c.AllocateJob(ctx, j) })
}

func (d *Discovering) GetJob(ctx context.Context, id uint32) (*Job, error) {
	return discovering(d, ctx, func(c Client) (*Job, error) { return c.GetJob(ctx, id) })
}

func (d *Discovering) ListJobs(ctx context.Context, since time.Time) (*JobList, error) {
	return discovering(d, ctx, func(c Client) (*JobList, error) { return c.ListJobs(ctx, since) })
}

func (d *Discovering) ListJobStates(ctx context.Context) ([]JobState, error) {
	return discovering(d, ctx, func(c Client) ([]JobState, error) { return c.ListJobStates(ctx) })
}

func (d *Discovering) CancelJob(ctx context.Context, id uint32) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.CancelJob(ctx, id) }))
}

func (d *Discovering) CancelJobs(ctx context.Context, ids []uint32) (map[uint32]error, error) {
	return discovering(d, ctx, func(c Client) (map[uint32]error, error) { return c.CancelJobs(ctx, ids) })
}

func (d *Discovering) SignalJob(ctx context.Context, id uint32, signal string) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.SignalJob(ctx, id, signal) }))
}

func (d *Discovering) UpdateJob(ctx context.Context, id uint32, u JobUpdate) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.UpdateJob(ctx, id, u) }))
}

func (d *Discovering) ListPartitions(ctx context.Context) ([]Partition, error) {
	return discovering(d, ctx, func(c Client) ([]Partition, error) { return c.ListPartitions(ctx) })
}

func (d *Discovering) GetPartition(ctx context.Context, name string) (*Partition, error) {
	return discovering(d, ctx, func(c Client) (*Partition, error) { return c.GetPartition(ctx, name) })
}

func (d *Discovering) ListReservations(ctx context.Context) ([]Reservation, error) {
	return discovering(d, ctx, func(c Client) ([]Reservation, error) { return c.ListReservations(ctx) })
}

func (d *Discovering) GetReservation(ctx context.Context, name string) (*Reservation, error) {
	return discovering(d, ctx, func(c Client) (*Reservation, error) { return c.GetReservation(ctx, name) })
}

func (d *Discovering) CreateReservation(ctx context.Context, r ReservationCreate) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.CreateReservation(ctx, r) }))
}

func (d *Discovering) DeleteReservation(ctx context.Context, name string) error {
	return errOnly(discovering(d, ctx, func(c Client) (struct{}, error) { return struct{}{}, c.DeleteReservation(ctx, name) }))
}

func errOnly(_ struct{}, err error) error { return err }

var _ Client = (*Discovering)(nil)
