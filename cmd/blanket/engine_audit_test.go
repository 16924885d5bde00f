//go:build audit

package main

import "testing"

// TestEngineCalibrateDeep is TestEngineCalibrate at n = 1e6.
func TestEngineCalibrateDeep(t *testing.T) {
	checkEngineCalibrate(t, "1e6")
}

// TestEngineCurveDeep is TestEngineCurve from n = 1e4 to 1e6.
func TestEngineCurveDeep(t *testing.T) {
	checkEngineCurve(t, "1e4:1e6")
}

// TestEngineCurve sweeps n from 1e3 to 1e5; 1e4 to 1e6, twice the CPU, is
// TestEngineCurveDeep (make audit).
func TestEngineCurve(t *testing.T) {
	checkEngineCurve(t, "1e3:1e5")
}
