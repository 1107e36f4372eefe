package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"runtime"
	"syscall"
)

// The files routes act as the user they name, and the sandbox's kernel
// (gVisor's, which enforces the usual owner, group and mode checks) makes
// every permission decision: the agent runs as root, so each files request
// runs on an OS thread of its own whose credentials are that user's (uid,
// gid and no supplementary groups, as exec's commands run). The agent never
// re-implements a permission check.
//
// Why a thread and not setfsuid: gVisor does not implement setfsuid or
// setfsgid (ENOSYS), while setresuid, setresgid and setgroups, made as raw
// system calls, change the calling thread only. syscall.Setresuid and its
// kind would not do: since Go 1.16 they change every thread of the process.
// The thread is locked to its goroutine and never unlocked, so the runtime
// ends it when the goroutine returns and no other goroutine ever runs with
// the user's credentials; threads the runtime starts meanwhile come from
// its template thread, not from this one.

// asUser serves a files route as ?user=: h runs with that user's
// credentials and is given the user. What the kernel refuses the user is
// forbidden, its message naming the user acted as.
func (s *Server) asUser(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request, identity) error) error {
	id, err := s.userParam(r)
	if err != nil {
		return err
	}
	err = id.act(func() error { return h(w, r, id) })
	var re *reqError
	if errors.Is(err, fs.ErrPermission) && !errors.As(err, &re) && !id.actsAsRoot() {
		err = &reqError{codeDenied, fmt.Sprintf("%s (the files API acts as %q here; ask for user=root to act as root)", message(err), id.name)}
	}
	return err
}

// act runs fn with id's credentials, on a thread of its own unless the
// agent already runs as id (root acting as root, or a test agent acting as
// the user it runs as). A panic in fn (http.ErrAbortHandler cuts a stream)
// is raised again in the caller's goroutine, where net/http recovers it.
func (id identity) act(fn func() error) error {
	if id.uid == os.Geteuid() && id.gid == os.Getegid() {
		return fn()
	}
	type outcome struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var o outcome
		defer func() {
			if v := recover(); v != nil {
				o = outcome{panicked: true, value: v}
			}
			done <- o
		}()
		if err := setThreadCreds(id.uid, id.gid); err != nil {
			o.err = err
			return
		}
		o.err = fn()
	}()
	o := <-done
	if o.panicked {
		panic(o.value)
	}
	return o.err
}

// setThreadCreds gives the calling thread, and only it, uid and gid as
// its real, effective and saved ids and no supplementary groups. Groups and
// gid go first, while the thread may still change them. Raising the user's
// ids in all three means nothing run on the thread can become root again;
// an effective uid other than 0 also drops the thread's capabilities, so
// the kernel checks its file accesses like any process of that user.
func setThreadCreds(uid, gid int) error {
	steps := []struct {
		name string
		trap uintptr
		a    [3]uintptr
	}{
		{"setgroups", syscall.SYS_SETGROUPS, [3]uintptr{0, 0, 0}},
		{"setresgid", syscall.SYS_SETRESGID, [3]uintptr{uintptr(gid), uintptr(gid), uintptr(gid)}},
		{"setresuid", syscall.SYS_SETRESUID, [3]uintptr{uintptr(uid), uintptr(uid), uintptr(uid)}},
	}
	for _, st := range steps {
		if _, _, e := syscall.RawSyscall(st.trap, st.a[0], st.a[1], st.a[2]); e != 0 {
			// Not wrapped: the agent cannot act as the user (it does not
			// run as root), which is its fault, not the client's.
			return fmt.Errorf("acting as uid %d gid %d: %s: %v", uid, gid, st.name, e.Error())
		}
	}
	return nil
}

// actsAsRoot reports whether id may give files away (chown to another
// owner): only root may.
func (id identity) actsAsRoot() bool { return id.uid == 0 }
