// Package control is the client side of the sweep workflows: it turns a
// sweep file (or perf-changelog entries) into the sweep workflow's planned,
// preflighted start input, starts it, stores its plan for reruns, reads its
// progress for status and watch, and sends operator decisions.
//
// It imports workflows because it speaks their API (start inputs, workflow
// IDs, queries, updates); it is the one package besides the workers that
// may. The CLI (starter) and the end-to-end tests call it; nothing it holds
// runs inside a workflow.
package control
