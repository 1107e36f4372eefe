package cluster

import "context"

// DetectOnce runs one pass of the failure detector.
func (c *Control) DetectOnce(ctx context.Context) { c.detect(ctx) }
