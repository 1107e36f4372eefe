package main

import (
	"context"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/internal/backend/microvm"
	"github.com/withruntime/withruntime/internal/server"
)

// microvmRun compares the microVM tier with two baselines measured in the
// same run: QEMU booting the same kernel and init with nothing of a
// sandbox around it (the floor of a microVM's boot), and a cold gVisor
// sandbox of the same size on the same machine. Under TCG (software
// emulation) the figures say nothing about KVM; the accelerator is
// printed with them.
func microvmRun(ctx context.Context, c config) error {
	accel := c.microvmAccel
	if accel == "auto" {
		accel = "tcg"
		if microvm.ProbeKVM(ctx, c.cache) {
			accel = "kvm"
		}
	}
	n := c.microvm
	fmt.Printf("withruntime bench, microVM tier, %s\n%s\n", time.Now().UTC().Format(time.RFC3339), machine(ctx, c.cache))
	fmt.Printf("sandbox %dx%d, accel %s, n %d, execs %d, idle %d\n\n", c.vcpus, c.mem, accel, n, c.execs, c.idle)

	var raw series
	for range n {
		d, err := microvm.RawBoot(ctx, c.cache, accel)
		if err != nil {
			return fmt.Errorf("raw QEMU boot: %w", err)
		}
		raw = append(raw, d)
	}
	up, err := startUpstream()
	if err != nil {
		return fmt.Errorf("egress upstream: %w", err)
	}
	defer up.Close()
	fresh := newFreshness()

	gv, err := startServer(ctx, c.cache, c.overcommit, nil, up)
	if err != nil {
		return fmt.Errorf("gvisor server: %w", err)
	}
	gb := &bencher{c: gv.c, vcpus: c.vcpus, mem: c.mem, fresh: fresh}
	gb.warm(ctx)
	gvCold := gb.sequential(ctx, shapePy, n, nil)
	gvRT, gvErr := gb.floorRT(ctx, c.execs)
	gv.done()
	if gvErr != nil {
		return fmt.Errorf("gvisor exec: %w", gvErr)
	}

	vm, err := startServer(ctx, c.cache, c.overcommit, nil, up, func(cfg *server.Config) {
		cfg.Isolation, cfg.BackendOptions = "microvm", map[string]string{microvm.AccelFlag: accel}
	})
	if err != nil {
		return fmt.Errorf("microvm server: %w", err)
	}
	defer vm.done()
	vb := &bencher{c: vm.c, vcpus: c.vcpus, mem: c.mem, fresh: fresh}
	vmCold := vb.sequential(ctx, shapePy, n, nil)
	vmRT, err := vb.floorRT(ctx, c.execs)
	if err != nil {
		return fmt.Errorf("microvm exec: %w", err)
	}
	pause, resume, err := vb.pauseResume(ctx, n)
	if err != nil {
		return fmt.Errorf("microvm pause and resume: %w", err)
	}
	idle, err := vb.idleMemory(ctx, c.idle, "withruntime-vm")
	if err != nil {
		return fmt.Errorf("microvm idle memory: %w", err)
	}

	header()
	raw.print("raw QEMU boot to init's answer (baseline, " + accel + ")")
	gvCold.print("gvisor cold (baseline)")
	vmCold.print("microvm cold (" + accel + ")")
	gvRT.print("gvisor exec round trip `true` (baseline)")
	vmRT.print("microvm exec round trip `true`")
	pause.print("microvm pause")
	resume.print("microvm resume to the first command answered")
	fmt.Printf("\nmicrovm host memory per idle sandbox: %.0f MiB (mean of %d, the cgroup of QEMU)\n", idle, c.idle)
	return fresh.verdict()
}
