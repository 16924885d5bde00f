package mechspec_test

import (
	"fmt"

	"github.com/blanket-dp/blanket/internal/mechspec"
)

func ExampleRegistry_Parse() {
	r := mechspec.NewRegistry()
	m, err := r.Parse("joint(krr:k=10, generic:eps0=1)")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m)
	fixed, ok := m.FixedEps0()
	fmt.Println(fixed, ok)

	_, err = r.Parse("joint(krr:k=10,")
	fmt.Println(err)
	// Output:
	// joint(krr:k=10,generic:eps0=1)
	// 0 false
	// mechspec: at 15 in "joint(krr:k=10,": expected mechanism name, got end of input
}
