package readme

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tsProject is a Node.js project in a temp dir where the TypeScript
// examples run as a user's would: `withruntime` in its node_modules is the
// SDK of this checkout, compiled from sdk/typescript/src (its package.json
// and exports as they are), and the frameworks the examples import (ai,
// @openai/agents, @langchain/core) are the SDK's pinned dev dependencies.
// Every example is compiled, type-checked, by one tsc run and then runs
// with node.
type tsProject struct {
	dir   string            // the project: package.json, node_modules, the examples
	index map[string]string // example (File:Line) -> its compiled .js
	diags map[string]string // its compiler errors
	names map[string]string // example -> its .ts
}

// tsGiven is what a TypeScript example may be given
// (<!-- example: given NAME -->), as code put before it.
var tsGiven = map[string]string{
	"Sandbox": `import { Sandbox } from "withruntime";`,
	"sbx": `import { Sandbox as ReadmeSandbox } from "withruntime";
const sbx = await ReadmeSandbox.create({ vcpus: 1, memoryMib: 1024, timeoutSeconds: 600, metadata: { test: "readme" } });`,
	"model":        `const model: any = (globalThis as any).__readmeModel; // the stand-in's`,
	"prompt":       `const prompt = "What is the 20th Fibonacci number? Compute it in the sandbox.";`,
	"instructions": `const instructions = "Answer by running code in the sandbox.";`,
	"chatModel": `import { FakeListChatModel } from "@langchain/core/utils/testing";
const chatModel = new FakeListChatModel({ responses: ["6765"] });`,
}

func newTSProject(t *testing.T, root string, all []Example) *tsProject {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		requireTool(t, "node", "the TypeScript examples run with node")
	}
	base, err := os.MkdirTemp("", "withruntime-readme-ts-")
	must(t, err)
	// The project outlives this subtest: the next TypeScript examples use
	// it too. The test process removes it at the end.
	tsCleanup = append(tsCleanup, func() { os.RemoveAll(base) })

	// The SDK: a copy of its sources and manifest, with the checkout's
	// node_modules when it has them (else npm ci, as scripts/test.sh does
	// for the SDK's own tests later), built by its own tsconfig.
	src := filepath.Join(root, "sdk", "typescript")
	sdk := filepath.Join(base, "sdk")
	must(t, os.MkdirAll(sdk, 0o755))
	must(t, exec.Command("cp", "-r", filepath.Join(src, "src"), filepath.Join(src, "package.json"),
		filepath.Join(src, "package-lock.json"), filepath.Join(src, "tsconfig.json"), filepath.Join(src, "README.md"), sdk).Run())
	if _, err := os.Stat(filepath.Join(src, "node_modules", "typescript")); err == nil {
		must(t, os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(sdk, "node_modules")))
	} else {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", "--ignore-scripts")
		cmd.Dir = sdk
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci for the TypeScript SDK: %v\n%s", err, b)
		}
	}
	tsc := filepath.Join(sdk, "node_modules", "typescript", "bin", "tsc")
	if b, err := exec.Command("node", tsc, "-p", filepath.Join(sdk, "tsconfig.json")).CombinedOutput(); err != nil {
		t.Fatalf("building the TypeScript SDK: %v\n%s", err, b)
	}

	// The project: every dependency of the SDK's, and withruntime itself.
	p := &tsProject{dir: filepath.Join(base, "project"), index: map[string]string{}, diags: map[string]string{}, names: map[string]string{}}
	nm := filepath.Join(p.dir, "node_modules")
	must(t, os.MkdirAll(nm, 0o755))
	deps, err := os.ReadDir(filepath.Join(sdk, "node_modules"))
	must(t, err)
	for _, d := range deps {
		if d.Name() == ".bin" || d.Name() == "withruntime" {
			continue
		}
		must(t, os.Symlink(filepath.Join(sdk, "node_modules", d.Name()), filepath.Join(nm, d.Name())))
	}
	must(t, os.Symlink(sdk, filepath.Join(nm, "withruntime")))
	must(t, os.WriteFile(filepath.Join(p.dir, "package.json"), []byte(`{"type": "module", "private": true}`+"\n"), 0o644))
	standin, err := os.ReadFile(filepath.Join(root, "test", "readme", "standin.mjs"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(p.dir, "standin.mjs"), standin, 0o644))

	// Every TypeScript example that runs, compiled at once.
	var files []string
	for i, ex := range all {
		if ex.Lang != "ts" || ex.Skip != "" {
			continue
		}
		var code strings.Builder
		for _, g := range ex.Given {
			pre, ok := tsGiven[g]
			if !ok && g != "my_agents" {
				t.Fatalf("%s: the test cannot give %q", ex, g)
			}
			code.WriteString(pre + "\n")
		}
		code.WriteString(ex.Code)
		if strings.Contains(strings.Join(ex.Given, " "), "sbx") {
			code.WriteString("await sbx.stop();\n")
		}
		// "export {}" makes a block without imports a module too (top-level await).
		code.WriteString("export {};\n")
		name := fmt.Sprintf("example%02d", i)
		must(t, os.WriteFile(filepath.Join(p.dir, name+".ts"), []byte(code.String()), 0o644))
		files = append(files, name+".ts")
		p.index[ex.String()] = filepath.Join(p.dir, "out", name+".js")
		p.names[ex.String()] = name + ".ts"
	}
	conf := map[string]any{
		"compilerOptions": map[string]any{
			"target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
			"lib": []string{"ES2022", "ESNext.Disposable", "DOM"}, "types": []string{"node"},
			"strict": false, "skipLibCheck": true, "outDir": "out", "rootDir": ".",
		},
		"files": files,
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	must(t, os.WriteFile(filepath.Join(p.dir, "tsconfig.json"), b, 0o644))
	cmd := exec.Command("node", tsc, "-p", "tsconfig.json", "--pretty", "false")
	cmd.Dir = p.dir
	out, _ := cmd.CombinedOutput() // errors are the examples' own, reported by each
	for _, l := range strings.Split(string(out), "\n") {
		if m := diagRe.FindStringSubmatch(l); m != nil {
			for ex, f := range p.names {
				if f == m[1] {
					p.diags[ex] += l + "\n"
				}
			}
		} else if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, " ") {
			t.Logf("tsc: %s", l)
		}
	}
	return p
}

var diagRe = regexp.MustCompile(`^(example\d+\.ts)\(\d+,\d+\): error`)

// tsCleanup removes the TypeScript project once every test ran.
var tsCleanup []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range tsCleanup {
		f()
	}
	os.Exit(code)
}

func (p *tsProject) run(t *testing.T, ex Example, dir string, env []string) string {
	t.Helper()
	if d := p.diags[ex.String()]; d != "" {
		src, _ := os.ReadFile(filepath.Join(p.dir, p.names[ex.String()]))
		t.Fatalf("%s does not compile:\n%s--- as compiled\n%s", ex, d, src)
	}
	js, ok := p.index[ex.String()]
	if !ok {
		t.Fatalf("%s was not compiled", ex)
	}
	var args []string
	if ex.Standin {
		u := url.URL{Scheme: "file", Path: filepath.Join(p.dir, "standin.mjs")}
		args = append(args, "--import", u.String())
	}
	args = append(args, js)
	cmd := exec.CommandContext(timeout(t), "node", args...)
	cmd.Env, cmd.Dir = env, dir
	return run(t, ex, cmd)
}
