package client

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Mode is the user's consent mode, as in golang.org/x/telemetry.
type Mode string

// The consent modes.
const (
	// ModeOff records nothing: Record is a no-op, nothing is fetched,
	// stored or uploaded. The zero Mode means ModeOff.
	ModeOff Mode = "off"
	// ModeLocal sends nothing off the device: it neither fetches the plan
	// nor uploads. It reports by the plan an earlier run in ModeOn cached
	// in Config.DataDir (or Config.Plan), and without one records nothing.
	// With a plan it stages values and seals every period's report
	// exactly as ModeOn does, and keeps the sealed reports on the device
	// (for Config.LocalRetention days) without ever uploading them, not
	// even after the user switches to ModeOn. The ledger counts them
	// apart. Without an uploader, a period closes at the next Record or
	// start.
	ModeLocal Mode = "local"
	// ModeOn also uploads the sealed reports to the shuffler.
	ModeOn Mode = "on"
)

// EnvMode is the environment variable ModeFromEnv reads.
const EnvMode = "BLANKET_TELEMETRY"

// ModeFromEnv returns the mode set by $BLANKET_TELEMETRY: "off", "local" or
// "on" (case-insensitive, surrounding spaces ignored). Unset or empty means
// ModeLocal, the default of golang.org/x/telemetry: values are processed and
// kept on the device, and nothing is uploaded until the user opts in. Any
// other value means ModeOff, so that a typo never turns uploading on;
// ModeFromEnvLogged says so in a log line.
func ModeFromEnv() Mode {
	m, _ := modeFromEnv()
	return m
}

// ModeFromEnvLogged is ModeFromEnv, which logs a warning through l
// (slog.Default() when nil) naming a value of $BLANKET_TELEMETRY it does
// not know, which means ModeOff: a user who set it wrong learns that
// telemetry is off, and why.
func ModeFromEnvLogged(l *slog.Logger) Mode {
	m, err := modeFromEnv()
	if err != nil {
		if l == nil {
			l = slog.Default()
		}
		l.Warn("blanket telemetry is off: "+EnvMode+" is not off, local or on", "value", os.Getenv(EnvMode))
	}
	return m
}

// modeFromEnv returns ModeFromEnv's mode, and an error for an unknown
// value.
func modeFromEnv() (Mode, error) {
	m, err := ParseMode(os.Getenv(EnvMode))
	if err != nil {
		return ModeOff, err
	}
	if m == "" {
		return ModeLocal, nil
	}
	return m, nil
}

// ParseMode parses "off", "local" or "on" (case-insensitive); "" parses to
// the zero Mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "", ModeOff, ModeLocal, ModeOn:
		return m, nil
	default:
		return ModeOff, fmt.Errorf("%w: mode %q, want off, local or on", ErrBadConfig, s)
	}
}

// String returns "off", "local" or "on".
func (m Mode) String() string {
	if m == "" {
		return string(ModeOff)
	}
	return string(m)
}
