package build

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/template"
)

func TestParseDockerfile(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		args  map[string]string
		from  From
		steps []Step
		start string
	}{
		{
			name:  "default base, run as root",
			text:  "FROM default\nRUN apt-get update\n",
			from:  From{Template: "default"},
			steps: []Step{{Run: "apt-get update", User: "root", Line: 2}},
		},
		{
			name: "template and image and archive",
			text: "from template://myteam/base:v2",
			from: From{Template: "myteam/base:v2"},
		},
		{
			name: "image with registry and digest, AS",
			text: "FROM registry.local:5000/team/py:3.12@sha256:" + strings.Repeat("a", 64) + " AS build",
			from: From{Image: "registry.local:5000/team/py:3.12@sha256:" + strings.Repeat("a", 64)},
		},
		{
			name: "archive",
			text: "FROM archive://images/app.tar",
			from: From{Archive: "images/app.tar"},
		},
		{
			name:  "case, comments, blank lines, continuation",
			text:  "# a comment\n\nfrom default\n  # indented comment\nrun apt-get install -y \\\n    git \\\n# inside\n\n    curl\n",
			from:  From{Template: "default"},
			steps: []Step{{Run: "apt-get install -y     git     curl", User: "root", Line: 5}},
		},
		{
			name:  "exec form run",
			text:  `FROM default` + "\n" + `RUN ["echo", "$HOME", "a b"]`,
			from:  From{Template: "default"},
			steps: []Step{{Run: "echo '$HOME' 'a b'", User: "root", Line: 2}},
		},
		{
			name: "env both forms and substitution",
			text: "FROM default\nENV A 1 2\nENV B=\"v 2\" C=$A D=${A} E=${NOPE:-dflt} F=${A:+alt} G='$A' H=\\$A\nENV A=x B=$A\n",
			from: From{Template: "default"},
			steps: []Step{
				{Env: map[string]string{"A": "1 2"}, Line: 2},
				{Env: map[string]string{"B": "v 2", "C": "1 2", "D": "1 2", "E": "dflt", "F": "alt", "G": "$A", "H": "$A"}, Line: 3},
				{Env: map[string]string{"A": "x", "B": "1 2"}, Line: 4},
			},
		},
		{
			name: "arg defaults, overrides, meta args, run env",
			text: "ARG TAG=3.12\nARG BASE\nFROM python:${TAG}\nARG TAG\nARG V=1\nARG W\nRUN echo $V\nWORKDIR /opt/$V\n",
			args: map[string]string{"V": "it's 2"},
			from: From{Image: "python:3.12"},
			steps: []Step{
				{Run: "export TAG=3.12 V='it'\\''s 2'\necho $V", User: "root", Line: 7},
				{Workdir: "/opt/it's 2", Line: 8},
			},
		},
		{
			name: "copy and add, chown, chmod, relative dest",
			text: "FROM default\nWORKDIR /srv\nCOPY --chown=user:user app/ ./app/\nADD --chmod=755 a.sh b.sh bin/\nCOPY [\"x y\", \"/etc/z\"]\nCOPY . .\nCOPY ./req.txt a/../b/./ /x/./y/\nCOPY\t--chown=user\tq\t/q\n",
			from: From{Template: "default"},
			steps: []Step{
				{Workdir: "/srv", Line: 2},
				{Copy: &Copy{Src: "app", Dest: "/srv/app/", User: "user"}, Line: 3},
				{Copy: &Copy{Src: "a.sh", Dest: "/srv/bin/", User: "root", Mode: "755"}, Line: 4},
				{Copy: &Copy{Src: "b.sh", Dest: "/srv/bin/", User: "root", Mode: "755"}, Line: 4},
				{Copy: &Copy{Src: "x y", Dest: "/etc/z", User: "root"}, Line: 5},
				{Copy: &Copy{Src: ".", Dest: "/srv/", User: "root"}, Line: 6},
				{Copy: &Copy{Src: "req.txt", Dest: "/x/y/", User: "root"}, Line: 7},
				{Copy: &Copy{Src: "b", Dest: "/x/y/", User: "root"}, Line: 7},
				{Copy: &Copy{Src: "q", Dest: "/q", User: "user"}, Line: 8},
			},
		},
		{
			name: "user then run, relative workdir",
			text: "FROM default\nUSER user\nRUN id\nWORKDIR a\nWORKDIR b/../c\n",
			from: From{Template: "default"},
			steps: []Step{
				{User: "user", Line: 2},
				{Run: "id", User: "user", Line: 3},
				{Workdir: "/a", Line: 4},
				{Workdir: "/a/c", Line: 5},
			},
		},
		{name: "cmd shell", text: "FROM default\nCMD python3 -m http.server 8000", from: From{Template: "default"}, start: "python3 -m http.server 8000"},
		{name: "cmd exec", text: "FROM default\nCMD [\"python3\", \"-c\", \"print('hi')\"]", from: From{Template: "default"}, start: `python3 -c 'print('\''hi'\'')'`},
		{name: "last cmd wins", text: "FROM default\nCMD a\nCMD b", from: From{Template: "default"}, start: "b"},
		{name: "entrypoint exec and cmd exec", text: "FROM default\nENTRYPOINT [\"node\"]\nCMD [\"server.js\", \"--port=80\"]", from: From{Template: "default"}, start: "node server.js --port=80"},
		{name: "entrypoint exec and cmd shell", text: "FROM default\nCMD run it\nENTRYPOINT [\"tini\", \"--\"]", from: From{Template: "default"}, start: "tini -- /bin/sh -c 'run it'"},
		{name: "entrypoint shell", text: "FROM default\nENTRYPOINT exec app", from: From{Template: "default"}, start: "exec app"},
		{
			name:  "escape directive and syntax directive",
			text:  "# syntax=docker/dockerfile:1\n# escape=`\nFROM default\nRUN echo a `\n  b\nENV W=C:\\x\n",
			from:  From{Template: "default"},
			steps: []Step{{Run: "echo a   b", User: "root", Line: 4}, {Env: map[string]string{"W": "C:\\x"}, Line: 6}},
		},
		{
			name: "unknown directive is a comment",
			text: "# foo=bar\nFROM default\n",
			from: From{Template: "default"},
		},
		{
			name:  "crlf",
			text:  "FROM default\r\nRUN true\r\n",
			from:  From{Template: "default"},
			steps: []Step{{Run: "true", User: "root", Line: 2}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseDockerfile(tc.text, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if *s.From != tc.from {
				t.Errorf("From = %+v, want %+v", *s.From, tc.from)
			}
			if !reflect.DeepEqual(s.Steps, tc.steps) {
				t.Errorf("Steps:\n got %s\nwant %s", show(s.Steps), show(tc.steps))
			}
			if s.StartCmd != tc.start {
				t.Errorf("StartCmd = %q, want %q", s.StartCmd, tc.start)
			}
		})
	}
}

func show(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		c := s.Copy
		s.Copy = nil
		fmt.Fprintf(&b, "\n  %+v", s)
		if c != nil {
			fmt.Fprintf(&b, " copy %+v", *c)
		}
	}
	return b.String()
}

func TestDockerfileRefused(t *testing.T) {
	tests := []struct {
		name, text string
		args       map[string]string
		want       string
	}{
		{"no from", "RUN true", nil, "line 1: RUN before FROM"},
		{"empty", "# nothing\n", nil, "no FROM"},
		{"scratch", "FROM scratch", nil, "line 1: FROM: scratch is an empty file system"},
		{"bad image", "FROM Ubuntu", nil, `line 1: FROM: "Ubuntu" is not an image reference`},
		{"bad template", "FROM template://Bad", nil, "line 1: FROM: bad template name"},
		{"platform", "FROM --platform=linux/arm64 default", nil, "line 1: FROM: --platform is not supported"},
		{"from words", "FROM a b", nil, "line 1: FROM: want FROM REF [AS NAME]"},
		{"multi-stage", "FROM default AS a\nRUN true\nFROM default\n", nil, "line 3: FROM: multi-stage builds are not supported (a second FROM; the first is on line 1)"},
		{"copy from", "FROM default\nCOPY --from=build /a /b", nil, "line 2: COPY: --from is multi-stage"},
		{"copy link", "FROM default\nCOPY --link a /b", nil, "line 2: COPY: --link is not supported"},
		{"run mount", "FROM default\nRUN --mount=type=cache,target=/x true", nil, "line 2: RUN: --mount is not supported"},
		{"heredoc run", "FROM default\nRUN <<EOF\necho hi\nEOF", nil, "line 2: RUN with a heredoc"},
		{"heredoc copy", "FROM default\nCOPY <<-\"EOF\" /x\nhi\nEOF", nil, "line 2: COPY with a heredoc"},
		{"add url", "FROM default\nADD https://example.org/x.tgz /x", nil, "line 2: ADD: \"https://example.org/x.tgz\": ADD of a URL"},
		{"add git", "FROM default\nADD git@github.com:a/b.git /x", nil, "line 2: ADD: \"git@github.com:a/b.git\": ADD of a URL or git"},
		{"add tar", "FROM default\n\nADD rootfs.tar.gz /", nil, "line 3: ADD: \"rootfs.tar.gz\": ADD of a tar archive"},
		{"wildcard", "FROM default\nCOPY *.py /app/", nil, "line 2: COPY: \"*.py\": wildcards are not supported"},
		{"copy out of context", "FROM default\nCOPY ../secret /x", nil, "line 2: COPY:"},
		{"copy absolute src", "FROM default\nCOPY /etc/passwd /x", nil, "line 2: COPY:"},
		{"copy one arg", "FROM default\nCOPY a", nil, "line 2: COPY: want COPY SRC... DEST"},
		{"copy many no slash", "FROM default\nCOPY a b /dest", nil, "must end in /"},
		{"chown group", "FROM default\nCOPY --chown=user:staff a /b", nil, "line 2: COPY: --chown: group \"staff\""},
		{"chown numeric", "FROM default\nCOPY --chown=1000 a /b", nil, "line 2: COPY: --chown: bad user"},
		{"chmod bad", "FROM default\nCOPY --chmod=u+x a /b", nil, "line 2: COPY:"},
		{"env bad name", "FROM default\nENV A-B=1", nil, "line 2: ENV:"},
		{"env no value", "FROM default\nENV A", nil, "line 2: ENV: A has no value"},
		{"env not pair", "FROM default\nENV A=1 B", nil, `line 2: ENV: "B" is not NAME=VALUE`},
		{"env unterminated", "FROM default\nENV A=\"x", nil, "line 2: ENV: unterminated double quote"},
		{"bad substitution", "FROM default\nENV A=${B#x}", nil, "line 2: ENV: unsupported substitution"},
		{"arg bad name", "FROM default\nARG 1X", nil, "line 2: ARG: bad name"},
		{"undeclared build arg", "FROM default", map[string]string{"X": "1"}, `build_args: build arg "X" is not declared`},
		{"user numeric", "FROM default\nUSER 1000", nil, "line 2: USER: bad user"},
		{"user group", "FROM default\nUSER a:b", nil, "line 2: USER: group \"b\""},
		{"workdir empty var", "FROM default\nWORKDIR $NOPE", nil, "line 2: WORKDIR: empty"},
		{"run empty exec", "FROM default\nRUN []", nil, "line 2: RUN: an empty exec form"},
		{"run no args", "FROM default\nRUN", nil, "line 2: RUN needs arguments"},
		{"cmd after shell entrypoint", "FROM default\nENTRYPOINT app\nCMD x", nil, "line 3: CMD has no effect after the shell-form ENTRYPOINT of line 2"},
		{"label", "FROM default\nLABEL a=b", nil, "line 2: LABEL is not supported: labels are metadata"},
		{"expose", "FROM default\n\n\nEXPOSE 80", nil, "line 4: EXPOSE is not supported"},
		{"healthcheck", "FROM default\nHEALTHCHECK CMD true", nil, "line 2: HEALTHCHECK is not supported: a template's readiness is its ready command"},
		{"volume", "FROM default\nVOLUME /data", nil, "line 2: VOLUME is not supported"},
		{"shell", "FROM default\nSHELL [\"bash\", \"-c\"]", nil, "line 2: SHELL is not supported"},
		{"stopsignal", "FROM default\nSTOPSIGNAL SIGTERM", nil, "line 2: STOPSIGNAL is not supported"},
		{"onbuild", "FROM default\nONBUILD RUN x", nil, "line 2: ONBUILD is not supported"},
		{"maintainer", "FROM default\nMAINTAINER me", nil, "line 2: MAINTAINER is not supported"},
		{"label before from", "LABEL a=b\nFROM default", nil, "line 1: LABEL is not supported"},
		{"unknown", "FROM default\nFROBNICATE x", nil, "line 2: unknown instruction FROBNICATE"},
		{"continued instruction line", "FROM default\nRUN a \\\n b\nEXPOSE \\\n 80", nil, "line 4: EXPOSE"},
		{"bad escape", "# escape=x\nFROM default", nil, "line 1: escape must be"},
		{"escape twice", "# escape=`\n# escape=`\nFROM default", nil, "line 2: the escape directive is given twice"},
		{"too many steps", "FROM default\n" + strings.Repeat("RUN x\n", MaxSteps+1), nil, "line 102: more than 100 steps"},
		{"expansion doubling", "FROM default\nENV A=0123456789abcdef\n" + strings.Repeat("ENV A=$A$A\n", 20), nil, "line 14: ENV: longer than 32768 bytes"},
		{"expansion wide", "FROM default\nARG A=" + strings.Repeat("x", 1000) + "\nENV B=" + strings.Repeat("$A", 200), nil, "line 3: ENV: expands to more than"},
		{"expansion deep", "FROM default\nENV A=" + strings.Repeat("${A:-", 9) + "x" + strings.Repeat("}", 9), nil, "line 2: ENV: ${...} nested more than 8 deep"},
		{"expansion very deep", "FROM default\nENV A=" + strings.Repeat("${A:-", 30000) + "x" + strings.Repeat("}", 30000), nil, "nested more than 8 deep"},
		{"too big", "FROM default\n#" + strings.Repeat("x", MaxDockerfileBytes), nil, "dockerfile: larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseDockerfile(tc.text, tc.args)
			if err == nil {
				t.Fatalf("ParseDockerfile = %+v, want an error containing %q", s, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *build.Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestDockerfileBase: the base's environment, workdir and (for an image)
// user are what Docker's substitution, a relative WORKDIR and RUN see.
func TestDockerfileBase(t *testing.T) {
	var asked []From
	base := func(f From) (template.Defaults, error) {
		asked = append(asked, f)
		return template.Defaults{Env: map[string]string{"PATH": "/usr/bin:/bin"}, Workdir: "/home/node", User: "node"}, nil
	}
	s, err := ParseDockerfileWith("ARG V=22\nFROM node:${V}\nENV PATH=/opt/bin:$PATH\nWORKDIR app\nRUN npm ci\nCOPY a .\n", DockerfileOptions{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Env: map[string]string{"PATH": "/opt/bin:/usr/bin:/bin"}, Line: 3},
		{Workdir: "/home/node/app", Line: 4},
		{Run: "npm ci", User: "node", Line: 5},
		{Copy: &Copy{Src: "a", Dest: "/home/node/app/", User: "root"}, Line: 6},
	}
	if !reflect.DeepEqual(s.Steps, want) {
		t.Errorf("Steps:\n got %s\nwant %s", show(s.Steps), show(want))
	}
	if len(asked) != 1 || asked[0] != (From{Image: "node:22"}) {
		t.Errorf("Base asked for %+v, want once for node:22", asked)
	}
	// A template's default user is its sandboxes', not its builds': RUN
	// stays root until a USER.
	s, err = ParseDockerfileWith("FROM template://team/x\nRUN id\n", DockerfileOptions{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if s.Steps[0].User != "root" {
		t.Errorf("RUN on a template base runs as %q, want root", s.Steps[0].User)
	}
	// An image whose USER is a number: its RUNs need a USER line first.
	numeric := func(From) (template.Defaults, error) { return template.Defaults{User: "1001"}, nil }
	if _, err := ParseDockerfileWith("FROM bitnami/x\nRUN id\n", DockerfileOptions{Base: numeric}); err == nil ||
		!strings.Contains(err.Error(), `line 2: RUN: it would run as the image's own USER "1001"`) {
		t.Errorf("RUN as an image's numeric USER: %v", err)
	}
	if s, err := ParseDockerfileWith("FROM bitnami/x\nUSER root\nRUN id\n", DockerfileOptions{Base: numeric}); err != nil || s.Steps[1].User != "root" {
		t.Errorf("USER root after an image's numeric USER: %v", err)
	}
	// The base's own error is returned with its identity (a missing
	// template is the caller's not_found, not a bad Dockerfile).
	errMissing := errors.New("no such template")
	_, err = ParseDockerfileWith("FROM default\n", DockerfileOptions{Base: func(From) (template.Defaults, error) {
		return template.Defaults{}, errMissing
	}})
	var e *Error
	if !errors.Is(err, errMissing) || errors.As(err, &e) || !strings.Contains(err.Error(), "line 1: FROM: no such template") {
		t.Errorf("a failing Base gave %v, want errMissing, not a *build.Error", err)
	}
}

func TestSpecResolve(t *testing.T) {
	s, err := Decode([]byte(`{"name": "app", "dockerfile": "FROM default\nARG V\nRUN echo $V\nCMD serve", "build_args": {"V": "9"}, "ready_cmd": "true"}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Dockerfile != "" || r.BuildArgs != nil || r.From.Template != "default" || len(r.Steps) != 1 ||
		r.Steps[0].Run != "export V=9\necho $V" || r.StartCmd != "serve" || r.ReadyCmd != "true" || r.Name != "app" {
		t.Errorf("Resolve = %+v", r)
	}
	s.StartCmd = "override"
	if r, err = s.Resolve(nil); err != nil || r.StartCmd != "override" {
		t.Errorf("a spec's start_cmd: got %q, %v; want it to win over CMD", r.StartCmd, err)
	}
	bad := &Spec{Name: "app", Dockerfile: "FROM default\nEXPOSE 1"}
	if _, err := bad.Resolve(nil); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Resolve of a bad Dockerfile: %v", err)
	}
}

// TestDockerfileLarge: the largest Dockerfiles, of the shapes that make a
// naive parser quadratic, parse (or are refused) in well under a second.
func TestDockerfileLarge(t *testing.T) {
	n := MaxDockerfileBytes/3 - 20
	for name, text := range map[string]string{
		"continuations":              "FROM default\nRUN x" + strings.Repeat(" \\\n", n),
		"comments in a continuation": "FROM default\nRUN x \\\n" + strings.Repeat("#\n", n),
		"words":                      "FROM default\nCOPY " + strings.Repeat("a ", n) + "/d/",
		"unterminated":               "FROM default\nENV A=" + strings.Repeat("${", n),
		"dollars":                    "FROM default\nENV A=" + strings.Repeat("$", 3*n),
	} {
		start := time.Now()
		ParseDockerfile(text, nil)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: %v", name, d)
		}
	}
}
