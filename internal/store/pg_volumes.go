package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// PutVolume inserts v.
func (p *Postgres) PutVolume(ctx context.Context, v Volume) error {
	data, err := encodeVolume(ctx, v)
	if err != nil {
		return err
	}
	_, err = p.pool.Exec(ctx, `INSERT INTO volumes (id, account, name, created_at, volume) VALUES ($1, $2, $3, $4, $5)`,
		v.ID, v.Account, v.Name, v.CreatedAt, data)
	if pgCode(err) == pgUniqueViolation {
		return sandbox.Errorf(sandbox.KindConflict, "a volume named %s exists", v.Name)
	}
	return dataError(err, "volume "+v.Name)
}

// GetVolume returns account's volume name.
func (p *Postgres) GetVolume(ctx context.Context, account, name string) (*Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(account, name) {
		return nil, volumeNotFound(name)
	}
	var data []byte
	err := p.pool.QueryRow(ctx, "SELECT volume FROM volumes WHERE account = $1 AND name = $2", account, name).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, volumeNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	return decode[Volume]("volume", name, data)
}

// ListVolumes returns account's volumes by name.
func (p *Postgres) ListVolumes(ctx context.Context, account string) ([]Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(account) {
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, "SELECT name, volume FROM volumes WHERE $1 = '' OR account = $1 ORDER BY account, name", account)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Volume
	for rows.Next() {
		var name string
		var data []byte
		if err := rows.Scan(&name, &data); err != nil {
			return nil, err
		}
		v, err := decode[Volume]("volume", name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}

// DeleteVolume removes account's volume name.
func (p *Postgres) DeleteVolume(ctx context.Context, account, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(account, name) {
		return volumeNotFound(name)
	}
	tag, err := p.pool.Exec(ctx, "DELETE FROM volumes WHERE account = $1 AND name = $2", account, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return volumeNotFound(name)
	}
	return nil
}
