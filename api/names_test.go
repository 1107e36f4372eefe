package api

import "testing"

func TestEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"OPENAI_API_KEY": true, "_x1": true, "a": true,
		"": false, "1A": false, "A-B": false, "A=B": false, "A,B": false, "Ä": false, "A\x00": false,
	} {
		if got := EnvName(name); got != want {
			t.Errorf("EnvName(%q): got %v, want %v", name, got, want)
		}
	}
}
