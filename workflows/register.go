package workflows

// Registry is what workflows are registered with: a worker, the replayer
// and the SDK's test environment alike.
type Registry interface {
	RegisterWorkflow(w any)
}

// Register registers the sweep's workflows (SweepWorkflow and its children
// DeploymentWorkflow and PointWorkflow) under their function names, the
// names histories record. The worker, the forecast runner, the
// orchestration bench and the replay test all register through it, so none
// can run a sweep without one of its children.
func Register(r Registry) {
	r.RegisterWorkflow(SweepWorkflow)
	r.RegisterWorkflow(DeploymentWorkflow)
	r.RegisterWorkflow(PointWorkflow)
}
