package agent

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// standInArg makes the test binary a stand-in code driver: the host has no
// IPython kernel, so the agent's framing and lifecycle are tested against
// this instead (the real driver runs in the gVisor tests through the API).
const standInArg = "code-driver-stand-in"

// useStandIn makes a's contexts run the stand-in driver.
func (a *testAgent) useStandIn() {
	a.srv.code.driverArgv = []string{os.Args[0], "-test.run=^TestStandInDriver$", standInArg}
}

// TestStandInDriver is not a test: run with standInArg it is the stand-in
// driver, speaking the driver's protocol. Its "kernel" knows a few cells:
// "print TEXT", "big N" (N bytes of stdout), "result", "hugeresult",
// "raise", "sleep" (until interrupted), "slowstop" (honours an interrupt,
// then ends slowly), "stubborn" (ignores interrupts), "flood N" (N events),
// "dead", "exit", "garbage", "hugeline", "env NAME", "cwd", "pid",
// "waitfile PATH" and "count" (the cells run so far: its state).
func TestStandInDriver(t *testing.T) {
	if flag.Arg(0) != standInArg {
		t.Skip("only the stand-in driver, run by the code tests")
	}
	os.Exit(standIn())
}

func standIn() int {
	out := bufio.NewWriter(os.Stdout)
	emit := func(ev map[string]any) {
		b, _ := json.Marshal(ev)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	if msg := os.Getenv("STANDIN_FATAL"); msg != "" {
		fmt.Fprintln(os.Stderr, "stand-in: about to fail")
		emit(map[string]any{"type": "fatal", "message": msg})
		return 1
	}
	emit(map[string]any{"type": "ready"})
	ops := make(chan driverOp)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var op driverOp
			if json.Unmarshal(sc.Bytes(), &op) == nil {
				ops <- op
			}
		}
		close(ops)
	}()
	cells, interrupts := 0, 0
	// waitInterrupt waits for the interrupt of cell id; false: stdin ended.
	waitInterrupt := func(id int64) bool {
		for op := range ops {
			if op.Op == "interrupt" && op.ID == id {
				interrupts++
				return true
			}
		}
		return false
	}
	for op := range ops {
		if op.Op != "execute" {
			continue
		}
		cells++
		cmd, arg, _ := strings.Cut(op.Code, " ")
		switch cmd {
		case "print":
			emit(map[string]any{"type": "stdout", "text": arg})
		case "big":
			n, _ := strconv.Atoi(arg)
			emit(map[string]any{"type": "stdout", "text": strings.Repeat("é", n/2)})
		case "result":
			emit(map[string]any{"type": "result", "result": map[string]any{"text": "42", "html": "<b>42</b>", "is_main_result": true}})
		case "hugeresult":
			emit(map[string]any{"type": "result", "result": map[string]any{"text": "<Figure>", "png": strings.Repeat("A", 5<<20)}})
		case "raise":
			emit(map[string]any{"type": "stderr", "text": "about to raise\n"})
			emit(map[string]any{"type": "exception", "exception": map[string]any{"name": "ValueError", "value": "bad", "traceback": "Traceback:\nValueError: bad"}})
		case "sleep":
			emit(map[string]any{"type": "stdout", "text": "sleeping\n"})
			if !waitInterrupt(op.ID) {
				return 0
			}
			emit(map[string]any{"type": "exception", "exception": map[string]any{"name": "KeyboardInterrupt", "value": "", "traceback": "in sleep\nKeyboardInterrupt"}})
		case "flood":
			n, _ := strconv.Atoi(arg)
			for i := range n {
				emit(map[string]any{"type": "stdout", "text": strconv.Itoa(i)})
			}
		case "slowstop":
			// Honours the interrupt, then takes longer than the grace to
			// end (post-execute hooks, the reply).
			emit(map[string]any{"type": "stdout", "text": "sleeping\n"})
			if !waitInterrupt(op.ID) {
				return 0
			}
			emit(map[string]any{"type": "exception", "exception": map[string]any{"name": "KeyboardInterrupt", "value": "", "traceback": "in slowstop\nKeyboardInterrupt"}})
			time.Sleep(interruptGrace + time.Second)
		case "stubborn":
			emit(map[string]any{"type": "stdout", "text": "ignoring interrupts\n"})
			for range ops {
			}
			return 0
		case "dead":
			emit(map[string]any{"type": "dead"})
			return 0
		case "exit":
			emit(map[string]any{"type": "stdout", "text": "exiting\n"})
			return 3
		case "garbage":
			out.WriteString("this is not json\n")
			out.Flush()
			time.Sleep(time.Minute)
			return 0
		case "hugeline":
			out.WriteString(`{"type":"stdout","text":"` + strings.Repeat("x", maxDriverLine+10) + "\"}\n")
			out.Flush()
			time.Sleep(time.Minute)
			return 0
		case "env":
			emit(map[string]any{"type": "stdout", "text": os.Getenv(arg)})
		case "cwd":
			wd, _ := os.Getwd()
			emit(map[string]any{"type": "stdout", "text": wd})
		case "pid":
			emit(map[string]any{"type": "stdout", "text": strconv.Itoa(os.Getpid())})
		case "waitfile":
			emit(map[string]any{"type": "stdout", "text": "waiting"})
			for {
				if _, err := os.Stat(arg); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			emit(map[string]any{"type": "stdout", "text": "found"})
		case "count":
			emit(map[string]any{"type": "stdout", "text": fmt.Sprintf("cells=%d interrupts=%d", cells, interrupts)})
		}
		emit(map[string]any{"type": "end", "execution_count": cells})
	}
	return 0
}
