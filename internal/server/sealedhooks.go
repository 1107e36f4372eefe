package server

import (
	"context"

	"github.com/withruntime/withruntime/internal/secrets"
	"github.com/withruntime/withruntime/internal/store"
)

// sealedHooks is a store whose webhooks' secrets are sealed with the
// installation's vault key: the database holds no secret that signs a
// delivery. The API's webhook routes and the delivery worker both go
// through it; everything else is the store's own.
type sealedHooks struct {
	store.Store
	vault *secrets.Vault
}

func (s sealedHooks) PutWebhook(ctx context.Context, w *store.Webhook, max int) error {
	sealed := *w
	sealed.Secret = s.vault.SealString(w.ID, w.Secret)
	return s.Store.PutWebhook(ctx, &sealed, max)
}

func (s sealedHooks) GetWebhook(ctx context.Context, id string) (*store.Webhook, error) {
	w, err := s.Store.GetWebhook(ctx, id)
	if err != nil {
		return nil, err
	}
	if w.Secret, err = s.vault.OpenString(w.ID, w.Secret); err != nil {
		return nil, err
	}
	return w, nil
}

func (s sealedHooks) ListWebhooks(ctx context.Context, account string) ([]store.Webhook, error) {
	list, err := s.Store.ListWebhooks(ctx, account)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Secret, err = s.vault.OpenString(list[i].ID, list[i].Secret); err != nil {
			return nil, err
		}
	}
	return list, nil
}
