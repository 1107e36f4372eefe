package main

import (
	"reflect"
	"testing"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/server"
)

// serve and node register the settings they share through one method
// (server.Config.RegisterFlags): each of its flags is in both commands
// with the same type, default and help, and nothing else either command
// registers has the name of one.
func TestServeAndNodeShareFlags(t *testing.T) {
	shared := specsOf(func(fs *pflag.FlagSet) func([]string) int {
		var c server.Config
		c.RegisterFlags(fs)
		return nil
	})
	if len(shared) == 0 {
		t.Fatal("server.Config.RegisterFlags registers no flag")
	}
	for _, cmd := range []struct {
		name  string
		specs []flagSpec
	}{{"serve", specsOf(serve)}, {"node", specsOf(runNode)}} {
		byName := map[string]flagSpec{}
		for _, s := range cmd.specs {
			byName[s.Name] = s
		}
		for _, want := range shared {
			if got, ok := byName[want.Name]; !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("%s --%s: got %+v (registered %v), want %+v", cmd.name, want.Name, got, ok, want)
			}
		}
	}
}
