package rpc

import (
	"fmt"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// MaxMessageBytes is the largest gRPC message a plugin accepts or sends,
// raised from gRPC's default of 4 MiB so that any batch fits; the host splits
// batches into requests far smaller than this (package sdk/plugin).
const MaxMessageBytes = math.MaxInt32

// Transport settings of a plugin connection, the same at both ends: the
// host's (Open) and the plugin's (Serve). Both were measured with batches
// of 4096 inputs on two cores, where a Randomize round trip through a
// plugin process is mostly fixed cost.

// windowBytes is the HTTP/2 flow-control window of a plugin connection and
// of each stream, large enough for any request the host sends (see
// maxRequestBytes). Setting it turns off gRPC's bandwidth-delay estimation,
// whose pings and window updates cost each call extra frames and wake-ups
// in both processes.
const windowBytes = 1 << 24

// DialOptions returns the host's gRPC options for a plugin connection
// (sdk/plugin), on top of go-plugin's.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(windowBytes),
		grpc.WithInitialConnWindowSize(windowBytes),
	}
}

// ServerOptions returns the plugin's gRPC server options, on top of
// go-plugin's: raised message limits (MaxMessageBytes), the window and the
// codec.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.InitialWindowSize(windowBytes),
		grpc.InitialConnWindowSize(windowBytes),
		grpc.ForceServerCodecV2(protoCodec{}),
	}
}

// callOptions are the options of every RPC of Client.
var callOptions = []grpc.CallOption{grpc.ForceCodecV2(protoCodec{})}

// protoCodec is the protobuf codec of both ends of a plugin connection:
// gRPC's own (named "proto", the same bytes on the wire), except that it
// takes its buffers from bufferPool rather than from gRPC's default pool.
// That pool's tiers jump from 32 KiB to 1 MiB, and it clears the whole
// buffer it hands out, so a message just over 32 KiB (a batch of 4096
// reals) cost a 1 MiB clear when it was marshaled and again when it was
// unmarshaled.
type protoCodec struct{}

// bufferPool has a tier at every power of two from 256 bytes to 16 MiB, so
// a buffer is less than twice the message it holds.
var bufferPool = func() mem.BufferPool {
	var exps []uint8
	for e := uint8(8); e <= 24; e++ {
		exps = append(exps, e)
	}
	p, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		panic(err) // only for invalid exponents
	}
	return p
}()

// Name returns "proto", the name of gRPC's protobuf codec.
func (protoCodec) Name() string { return "proto" }

// Marshal encodes v, a proto.Message, into a buffer of bufferPool when it
// is large enough for pooling to pay.
func (protoCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("sdk: cannot marshal a %T, want a proto.Message", v)
	}
	size := proto.Size(m)
	// The size was just computed and the message is not mutated
	// concurrently, so the cached size is right.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := bufferPool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		bufferPool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, bufferPool)}, nil
}

// Unmarshal decodes data into v, a proto.Message. A message that arrived
// in several frames is first joined in a buffer of bufferPool.
func (protoCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("sdk: cannot unmarshal into a %T, want a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(bufferPool)
	defer buf.Free()
	// proto.Unmarshal copies bytes fields, so nothing refers to buf
	// afterwards.
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}
