// Package bench holds the benchmark harnesses behind `starter bench`: the
// endpoint benchmark (InferenceX metrics against any OpenAI-compatible
// server, with trace generation), the load generator's own capacity, the
// orchestration benchmark (a sweep of many points on a no-op cluster,
// measuring the workflows alone), the node-minutes table of a plan and the
// time to forecast a whole master config.
// They print their figures; performance targets live here, not in timed
// tests. The orchestration harness drives the real sweep workflows, so it
// is one of the few packages that imports workflows.
package bench
