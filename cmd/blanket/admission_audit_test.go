//go:build audit

package main

import "testing"

// TestServeAdmissionRefusesFakesDeep is TestServeAdmissionRefusesFakes
// with n_min 200: 2000 fakes against 200 admitted reports.
func TestServeAdmissionRefusesFakesDeep(t *testing.T) { admissionFlood(t, 200) }

// TestIssuerAndShufflerSurviveKillDeep is TestIssuerAndShufflerSurviveKill
// with 300 instances (n_min 100) and five kills of each role.
func TestIssuerAndShufflerSurviveKillDeep(t *testing.T) { killRoles(t, 300, 100, 5) }
