package promexport

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Registry is what an API server of many hosts reads of the shared store
// at each scrape: the node registry and the live sandboxes' records.
type Registry interface {
	ListNodes(ctx context.Context) ([]store.Node, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Record, error)
}

// registryTimeout bounds a scrape's reads of the store: a dead store is
// store_up 0 by then, never a scrape that hangs.
const registryTimeout = 2 * time.Second

// Node states as the withruntime_nodes label has them: up (its lease
// holds), expired (its lease ran out, the failure detector has not yet
// declared it lost) and lost (declared lost: its sandboxes ended or moved).
const (
	nodeUp      = "up"
	nodeExpired = "expired"
	nodeLost    = "lost"
)

// WatchCluster makes every scrape read the installation's node registry
// and live sandboxes from st (an API server of many hosts, whose own
// process runs no sandbox). Node ids are labels: they are the operator's
// hosts, as many as it runs; addresses never are.
func (e *Exporter) WatchCluster(st Registry) {
	e.reg.MustRegister(&clusterCollector{st: st, now: time.Now})
}

// clusterCollector reads the registry at each scrape.
type clusterCollector struct {
	st  Registry
	now func() time.Time
}

var (
	storeUpDesc      = prometheus.NewDesc(namespace+"_store_up", "1 when the shared store answered this scrape's reads (the node registry and the live sandboxes) within 2 s.", nil, nil)
	storeLatencyDesc = prometheus.NewDesc(namespace+"_store_latency_seconds", "How long this scrape's read of the node registry took (the time it waited when the store did not answer).", nil, nil)
	nodesDesc        = prometheus.NewDesc(namespace+"_nodes", "Registered nodes by state: up (lease holds), expired (lease ran out, not yet declared lost), lost.", []string{"state"}, nil)
	compatDesc       = prometheus.NewDesc(namespace+"_nodes_compat_groups", "Distinct checkpoint compatibilities (runsc build and CPU features) among up nodes: past 1, a shared checkpoint resumes only on the nodes of its own.", nil, nil)
	nodeUpDesc       = prometheus.NewDesc(namespace+"_node_up", "1 when the node's lease holds and it was not declared lost, by node id.", []string{"node"}, nil)
	heartbeatDesc    = prometheus.NewDesc(namespace+"_node_heartbeat_age_seconds", "Seconds since the node last renewed its lease (by the API server's clock), by node id.", []string{"node"}, nil)
	nodeCapDesc      = prometheus.NewDesc(namespace+"_node_capacity", "What the node's admission may hand out (its registered capacity times its overcommit ratio), by node id and resource (vcpus, memory_mib, disk_mib).", []string{"node", "resource"}, nil)
	nodeHeldDesc     = prometheus.NewDesc(namespace+"_node_held", "What the node reported its live sandboxes hold at its last renewal, by node id and resource.", []string{"node", "resource"}, nil)
	nodeBoxesDesc    = prometheus.NewDesc(namespace+"_node_sandboxes", "Live sandboxes the node reported at its last renewal, by node id.", []string{"node"}, nil)
	clusterBoxesDesc = prometheus.NewDesc(namespace+"_cluster_sandboxes", "Sandboxes of the whole installation that have not ended, by isolation and state (the store's records).", []string{"isolation", "state"}, nil)
)

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{storeUpDesc, storeLatencyDesc, nodesDesc, compatDesc, nodeUpDesc, heartbeatDesc, nodeCapDesc, nodeHeldDesc, nodeBoxesDesc, clusterBoxesDesc} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	start := c.now()
	nodes, err := c.st.ListNodes(ctx)
	ch <- gauge(storeLatencyDesc, c.now().Sub(start).Seconds())
	var recs []*sandbox.Record
	if err == nil {
		recs, err = c.st.ListSandboxes(ctx, store.SandboxFilter{States: []sandbox.State{sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused}})
	}
	if err != nil {
		ch <- gauge(storeUpDesc, 0)
		return
	}
	ch <- gauge(storeUpDesc, 1)
	c.collectNodes(ch, nodes)
	boxes := map[[2]string]int{}
	for _, r := range recs {
		iso := r.Spec.Isolation
		if iso == "" {
			iso = r.Backend
		}
		boxes[[2]string{iso, string(r.State)}]++
	}
	for k, n := range boxes {
		ch <- gauge(clusterBoxesDesc, float64(n), k[0], k[1])
	}
}

// collectNodes is the registry's part of a scrape: every state counted
// (0 too, for alerts), each node's lease, capacity and load.
func (c *clusterCollector) collectNodes(ch chan<- prometheus.Metric, nodes []store.Node) {
	states := map[string]int{nodeUp: 0, nodeExpired: 0, nodeLost: 0}
	compat := map[string]bool{}
	now := c.now()
	for _, n := range nodes {
		state := nodeState(n)
		states[state]++
		up := 0.0
		if state == nodeUp {
			up = 1
			compat[n.Compat] = true
		}
		ch <- gauge(nodeUpDesc, up, n.ID)
		ch <- gauge(heartbeatDesc, max(0, now.Sub(n.RenewedAt).Seconds()), n.ID)
		oc := n.Overcommit
		if oc <= 0 {
			oc = 1
		}
		ch <- gauge(nodeCapDesc, float64(n.CPUs)*oc, n.ID, "vcpus")
		ch <- gauge(nodeCapDesc, float64(n.MemoryMiB)*oc, n.ID, "memory_mib")
		if n.DiskMiB > 0 { // a node that reports no disk admits none
			ch <- gauge(nodeCapDesc, float64(n.DiskMiB)*oc, n.ID, "disk_mib")
		}
		ch <- gauge(nodeHeldDesc, float64(n.Load.VCPUs), n.ID, "vcpus")
		ch <- gauge(nodeHeldDesc, float64(n.Load.MemoryMiB), n.ID, "memory_mib")
		ch <- gauge(nodeHeldDesc, float64(n.Load.DiskMiB), n.ID, "disk_mib")
		ch <- gauge(nodeBoxesDesc, float64(n.Load.Sandboxes), n.ID)
	}
	for s, k := range states {
		ch <- gauge(nodesDesc, float64(k), s)
	}
	ch <- gauge(compatDesc, float64(len(compat)))
}

// nodeState is n's state as the nodes label has it.
func nodeState(n store.Node) string {
	switch {
	case n.Lost:
		return nodeLost
	case n.Expired:
		return nodeExpired
	}
	return nodeUp
}

// gauge is a gauge's sample at this scrape.
func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}
