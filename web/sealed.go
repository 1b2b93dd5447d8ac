package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// A sealed cookie holds a JSON value encrypted and authenticated with AES-256-GCM under a key
// derived (HKDF-SHA256) from Config.SessionKey and the cookie's purpose: the browser can neither
// read nor change it, and a value sealed for one purpose does not open for another. Every
// instance sharing the session key opens the cookies of the others.

// sealAEAD returns the AEAD of purpose.
func (h *handler) sealAEAD(purpose string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, h.cfg.SessionKey, nil, "redrive sealed cookie "+purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the %s key: %w", purpose, err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%s cipher: %w", purpose, err)
	}
	return cipher.NewGCMWithRandomNonce(block)
}

// seal returns v as a sealed cookie value for purpose.
func (h *handler) seal(purpose string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode the %s cookie: %w", purpose, err)
	}
	aead, err := h.sealAEAD(purpose)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nil, nil, plain, []byte(purpose))), nil
}

// unseal decodes a cookie value sealed for purpose into v; it reports false for a value that
// was not sealed for purpose under this key, or was changed.
func (h *handler) unseal(purpose, value string, v any) bool {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(value) > maxSealedCookie {
		return false
	}
	aead, err := h.sealAEAD(purpose)
	if err != nil {
		return false
	}
	plain, err := aead.Open(nil, nil, raw, []byte(purpose))
	if err != nil {
		return false
	}
	return json.Unmarshal(plain, v) == nil
}

// maxSealedCookie bounds a sealed cookie value a request may carry.
const maxSealedCookie = 4096
