// Module tools pins the code generators `make generate` runs, so that the
// main module does not carry them: go tool -modfile=tools/go.mod ...
module github.com/blanket-dp/blanket/tools

go 1.26

tool (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
