package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// errUnknownKey means a token names a key that the provider's key set does not hold, even
// after a refetch (or a refetch was not allowed yet).
var errUnknownKey = errors.New("unknown signing key")

// keySet caches the provider's JSON Web Key Set. The keys fetched live as long as the
// provider's Cache-Control max-age (or Expires) says, but never longer than maxAge and never
// shorter than refetchEvery: a key withdrawn from the set is refused at the latest maxAge after
// it was fetched. Once the keys have expired they are fetched again before the next
// verification, and while that fails every verification fails with ErrProviderUnavailable
// rather than trusting keys that may have been withdrawn. A token whose key id is not in the
// set makes it fetch the keys again at most once per refetchEvery; concurrent requests share
// one fetch (singleflight).
type keySet struct {
	url          string
	client       *http.Client
	now          func() time.Time
	maxAge       time.Duration
	refetchEvery time.Duration

	flight singleflight.Group

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	expires  time.Time // the keys are not used from then on
	attempt  time.Time // the last fetch started then
	fetchErr error     // the last fetch's failure, nil after a success
}

// key returns the key with id kid for algorithm alg.
func (k *keySet) key(ctx context.Context, kid, alg string) (*jose.JSONWebKey, error) {
	k.mu.Lock()
	now := k.now()
	fresh := now.Before(k.expires)
	if fresh {
		if key := k.find(kid, alg); key != nil {
			k.mu.Unlock()
			return key, nil
		}
	}
	recent := !k.attempt.IsZero() && now.Sub(k.attempt) < k.refetchEvery
	lastErr := k.fetchErr
	k.mu.Unlock()
	if recent {
		// Rate-limited: an unknown key id does not make the provider's keys be fetched again
		// before refetchEvery has passed, whoever sends how many tokens.
		if !fresh && lastErr != nil {
			return nil, lastErr
		}
		if fresh {
			return nil, errUnknownKey
		}
	}
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if key := k.find(kid, alg); key != nil {
		return key, nil
	}
	return nil, errUnknownKey
}

// find returns the signing key kid of the set (any key when kid is empty and the set holds
// only one for alg), or nil. k.mu is held.
func (k *keySet) find(kid, alg string) *jose.JSONWebKey {
	var match *jose.JSONWebKey
	n := 0
	for i := range k.keys {
		key := &k.keys[i]
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if key.Algorithm != "" && key.Algorithm != alg {
			continue
		}
		if kid == "" {
			match, n = key, n+1
			continue
		}
		if key.KeyID == kid {
			return key
		}
	}
	if kid == "" && n == 1 {
		return match
	}
	return nil
}

// refresh fetches the key set once for every caller that asks meanwhile.
func (k *keySet) refresh(ctx context.Context) error {
	ch := k.flight.DoChan("jwks", func() (any, error) {
		k.mu.Lock()
		k.attempt = k.now()
		k.mu.Unlock()
		// The fetch outlives a caller that gives up: the others wait for it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		keys, lifetime, err := k.fetch(fctx)
		k.mu.Lock()
		defer k.mu.Unlock()
		if err != nil {
			k.fetchErr = fmt.Errorf("%w: its keys (%s): %v", ErrProviderUnavailable, k.url, err)
			return nil, k.fetchErr
		}
		k.keys, k.fetchErr = keys, nil
		k.expires = k.now().Add(lifetime)
		return nil, nil
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrProviderUnavailable, ctx.Err())
	}
}

// fetch reads the key set and the lifetime its answer allows.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, fmt.Errorf("the key set does not decode: %v", err)
	}
	var keys []jose.JSONWebKey
	for _, key := range set.Keys {
		if key.IsPublic() && key.Valid() {
			keys = append(keys, key)
		}
	}
	return keys, k.lifetime(resp.Header), nil
}

// lifetime is how long an answer with header h may be used: its Cache-Control max-age (or
// its Expires), within [refetchEvery, maxAge]; maxAge when it says nothing.
func (k *keySet) lifetime(h http.Header) time.Duration {
	d, ok := cacheLifetime(h, k.now())
	if !ok {
		return k.maxAge
	}
	return min(max(d, k.refetchEvery), k.maxAge)
}

// cacheLifetime reads the freshness lifetime of an HTTP answer: Cache-Control no-store and
// no-cache mean none, max-age (or s-maxage) gives it, else Expires (minus Date, or now).
func cacheLifetime(h http.Header, now time.Time) (time.Duration, bool) {
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				return 0, true
			case "max-age", "s-maxage":
				if n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64); err == nil && n >= 0 {
					return time.Duration(min(n, int64(365*24*3600))) * time.Second, true
				}
			}
		}
	}
	if e := h.Get("Expires"); e != "" {
		exp, err := http.ParseTime(e)
		if err != nil {
			return 0, true // an invalid Expires means already expired (RFC 9111 5.3)
		}
		base := now
		if d, err := http.ParseTime(h.Get("Date")); err == nil {
			base = d
		}
		return max(exp.Sub(base), 0), true
	}
	return 0, false
}
