package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
)

// Clients ask for the model the deployment serves: a TensorRT-LLM worker
// serves its checkpoint directory's name, not InferenceX's model id, and a
// request for the id would be refused (404) by a real dynamo frontend.
func TestClientsAskForTheServedModel(t *testing.T) {
	a := &Activities{}
	p := point.Spec{Model: "deepseek-ai/DeepSeek-V4-Pro-0813", Conc: 4}
	assert.Equal(t, "DeepSeek-V4-Pro-0813", a.options(p, cluster.Server{URL: "http://h:8000", Model: "DeepSeek-V4-Pro-0813"}).Model)
	assert.Equal(t, "deepseek-ai/DeepSeek-V4-Pro-0813", a.options(p, cluster.Server{URL: "http://h:8000"}).Model,
		"a backend that does not know the served name keeps the row's model")
	assert.Equal(t, "DeepSeek-V4-Pro-0813", servedModel(p, &cluster.Server{Model: "DeepSeek-V4-Pro-0813"}))
	assert.Equal(t, p.Model, servedModel(p, nil))
}
