package builtin_test

import (
	"context"
	"fmt"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
)

// Open a built-in randomizer in process; any other name would be looked up
// as a plugin binary blanket-<name> in $BLANKET_PLUGIN_DIR.
func ExampleOpen() {
	ctx := context.Background()
	r, err := builtin.Open(ctx, "krr", sdk.Config{Categories: []string{"home", "search", "settings"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	d, _ := r.Describe(ctx)
	fmt.Println(d.Name, d.Input, d.Categories, "built in:", r.Path() == "")

	reports, _ := r.Randomize(ctx, 2, sdk.Inputs{Categories: []string{"search", "home", "search"}})
	stat, _ := r.Accumulate(ctx, 2, reports)
	fmt.Println(len(reports), "reports,", stat.N, "counted")

	_, err = r.Randomize(ctx, 2, sdk.Inputs{Categories: []string{"profile"}})
	fmt.Println(err)
	// Output:
	// krr categorical [home search settings] built in: true
	// 3 reports, 3 counted
	// sdk: bad input: input 0: "profile" is not a category and there is no other bucket
}
