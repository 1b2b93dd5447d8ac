package auth

import "testing"

func FuzzParseTokens(f *testing.F) {
	f.Add("alice:admin:0123456789abcdef,bob:viewer:sha256:" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	f.Add("a:b:c")
	f.Fuzz(func(t *testing.T, spec string) {
		tokens, err := ParseTokens(spec)
		if err != nil {
			return
		}
		for _, tk := range tokens {
			if tk.Name == "" || tk.Role == RoleNone {
				t.Fatalf("%q gave token %+v", spec, tk)
			}
		}
	})
}
