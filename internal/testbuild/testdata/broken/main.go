// Command broken does not compile, for testbuild's own test.
package main

func main() { undefinedForTestbuild() }
