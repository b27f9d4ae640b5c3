package slurmfake

// Partitions and reservations.

import (
	"context"
	"slices"
	"sort"
	"strings"

	"sunk.dev/sunk/pkg/slurm"
)

func (f *Fake) ListPartitions(ctx context.Context) ([]slurm.Partition, error) {
	if err := f.enter(ctx, "ListPartitions"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := make([]slurm.Partition, 0, len(f.partitions))
	for _, p := range f.partitions {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) GetPartition(ctx context.Context, name string) (*slurm.Partition, error) {
	if err := f.enter(ctx, "GetPartition"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	p, ok := f.partitions[name]
	if !ok {
		return nil, notFound("partition", name)
	}
	return &p, nil
}

func (f *Fake) ListReservations(ctx context.Context) ([]slurm.Reservation, error) {
	if err := f.enter(ctx, "ListReservations"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := make([]slurm.Reservation, 0, len(f.reservations))
	for _, r := range f.reservations {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) GetReservation(ctx context.Context, name string) (*slurm.Reservation, error) {
	if err := f.enter(ctx, "GetReservation"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	r, ok := f.reservations[name]
	if !ok {
		return nil, notFound("reservation", name)
	}
	return &r, nil
}

// CreateReservation stores the reservation (the real client returns ErrUnsupported on 24.11;
// tests that need that can SetError("CreateReservation", ...)).
func (f *Fake) CreateReservation(ctx context.Context, r slurm.ReservationCreate) error {
	if err := f.enter(ctx, "CreateReservation"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.reservations[r.Name]; ok || r.Name == "" {
		return &slurm.SlurmError{Endpoint: "slurmfake reservation", HTTPStatus: 500, Description: "reservation name taken or empty"}
	}
	start := r.StartTime
	if start.IsZero() {
		start = f.now()
	}
	f.reservations[r.Name] = slurm.Reservation{
		Name: r.Name, Nodes: strings.Join(r.Nodes, ","), NodeCount: len(r.Nodes), StartTime: start,
		EndTime: start.Add(r.Duration), Flags: slices.Clone(r.Flags), Users: strings.Join(r.Users, ","),
		Accounts: strings.Join(r.Accounts, ","), Partition: r.Partition,
	}
	return nil
}

func (f *Fake) DeleteReservation(ctx context.Context, name string) error {
	if err := f.enter(ctx, "DeleteReservation"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.reservations[name]; !ok {
		return notFound("reservation", name)
	}
	delete(f.reservations, name)
	return nil
}
