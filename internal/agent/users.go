package agent

import (
	"net/http"

	"github.com/withruntime/withruntime/api"
)

// identity is whom a command runs as and who owns the files it is given.
type identity struct {
	name     string // api.UserDefault or api.UserRoot
	uid, gid int
	home     string
}

// identity resolves a request's user: api.UserDefault is the sandbox user
// of Config, api.UserRoot is uid 0 with HOME /root, and "" is
// Config.DefaultUser (the sandbox user unless a template says root).
func (s *Server) identity(user string) (identity, error) {
	if err := api.CheckUser(user); err != nil {
		return identity{}, invalidf("%v, not %q", err, user)
	}
	if user == "" {
		user = s.cfg.DefaultUser
	}
	if user == api.UserRoot {
		return identity{name: api.UserRoot, uid: 0, gid: 0, home: "/root"}, nil
	}
	return identity{name: api.UserDefault, uid: s.cfg.UID, gid: s.cfg.GID, home: s.cfg.Home}, nil
}

// userParam reads a files route's ?user=.
func (s *Server) userParam(r *http.Request) (identity, error) {
	return s.identity(r.URL.Query().Get("user"))
}

// userEnv is what running as id changes in a command's base environment.
func (id identity) userEnv() map[string]string {
	if id.name != api.UserRoot {
		return nil
	}
	return map[string]string{"HOME": "/root", "USER": "root", "LOGNAME": "root"}
}
