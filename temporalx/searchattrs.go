package temporalx

import (
	"go.temporal.io/sdk/temporal"
)

// Custom search attributes. They are registered on the server (the dev server
// gets them as --search-attribute flags) and let the Web UI list and filter
// sweeps and points. None is called "Status": that clashes with the UI's
// execution status column.
var (
	SASweepID     = temporal.NewSearchAttributeKeyKeyword("SweepID")
	SAConfigKey   = temporal.NewSearchAttributeKeyKeyword("ConfigKey")
	SATopology    = temporal.NewSearchAttributeKeyKeyword("Topology")
	SAConcurrency = temporal.NewSearchAttributeKeyInt64("Concurrency")
	SAStage       = temporal.NewSearchAttributeKeyKeyword("Stage")
	SAPointStatus = temporal.NewSearchAttributeKeyKeyword("PointStatus")
	SAKind        = temporal.NewSearchAttributeKeyKeyword("SweepflowKind")
	// FailureClass is a point's latest failure class (package failure);
	// unset on a point that never failed.
	SAFailureClass = temporal.NewSearchAttributeKeyKeyword("FailureClass")
	// RegressionCount is set by nightly sweeps after the baseline comparison.
	SARegressionCount = temporal.NewSearchAttributeKeyInt64("RegressionCount")
	// Adaptive is the adaptive search (fill, slo) that added a point, and
	// on a sweep the searches it runs: `Adaptive = "fill"` lists both.
	SAAdaptive = temporal.NewSearchAttributeKeyKeywordList("Adaptive")
	// Power is a point's power verdict once perf stored it: "valid",
	// "simulated" (valid, from the simulator's model) or "invalid" (the
	// power gate refused it; the perf figures stand). JoulesPerOutputToken
	// is set with a valid one: `JoulesPerOutputToken > 2` finds the costly
	// points.
	SAPower                = temporal.NewSearchAttributeKeyKeyword("Power")
	SAJoulesPerOutputToken = temporal.NewSearchAttributeKeyFloat64("JoulesPerOutputToken")
)

// SearchAttributeTypes lists every custom attribute with its type name as the
// server's `--search-attribute Name=Type` flag wants it.
func SearchAttributeTypes() map[string]string {
	return map[string]string{
		SASweepID.GetName():              "Keyword",
		SAConfigKey.GetName():            "Keyword",
		SATopology.GetName():             "Keyword",
		SAConcurrency.GetName():          "Int",
		SAStage.GetName():                "Keyword",
		SAPointStatus.GetName():          "Keyword",
		SAKind.GetName():                 "Keyword",
		SARegressionCount.GetName():      "Int",
		SAFailureClass.GetName():         "Keyword",
		SAAdaptive.GetName():             "KeywordList",
		SAPower.GetName():                "Keyword",
		SAJoulesPerOutputToken.GetName(): "Double",
	}
}

// Kinds, the values of SweepflowKind, so one query lists sweeps or points.
const (
	KindSweep = "sweep"
	KindPoint = "point"
	// KindNightly is a nightly regression run (package nightly), so
	// `SweepflowKind="nightly" AND RegressionCount > 0` lists the bad nights.
	KindNightly = "nightly"
)
