package sdk

import "context"

// PackedRandomizer is an optional interface of a Randomizer whose reports
// all have Description.ReportBytes bytes. the plugin protocol's server (package sdk/rpc) calls it
// instead of Randomize, with the batch in the form it travels in: categorical inputs
// dictionary-encoded and reports concatenated, so that a batch costs
// neither a string per input nor a slice per report, and a categorical
// randomizer looks up each distinct label once rather than once per input.
//
// A type that embeds a PackedRandomizer to change its Randomize must change
// RandomizePacked too: the server would call the embedded one.
type PackedRandomizer interface {
	Randomizer
	// RandomizePacked is Randomize on the inputs in, returning the reports
	// concatenated in input order: in.Len() reports of ReportBytes each.
	// It fails as Randomize does on the same inputs, with the same errors.
	RandomizePacked(ctx context.Context, eps0 float64, in PackedInputs) ([]byte, error)
}

// PackedInputs is a batch of inputs of one kind in the form they travel to
// a plugin: categorical inputs as a dictionary, Labels holding each
// distinct value once and Index one index into Labels per input, or real
// ones in Reals. Every index is less than len(Labels) (the server rejects
// other batches before they reach a PackedRandomizer). Input i of the
// batch is the category Labels[Index[i]].
type PackedInputs struct {
	// Labels are the distinct category labels of the batch.
	Labels []string
	// Index holds, for each input in order, the index of its label in
	// Labels.
	Index []uint32
	// Reals are real values, as in Inputs.
	Reals []float64
}

// Len returns the number of values in the batch.
func (in PackedInputs) Len() int { return len(in.Index) + len(in.Reals) }
