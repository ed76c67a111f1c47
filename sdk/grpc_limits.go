package sdk

import (
	"google.golang.org/grpc"
)

// MaxMessageBytes bounds one gRPC message between host and plugin. It fits
// the largest call the record limits allow (a Remember of MaxBatch records
// at every limit, with room for ids, times and framing); gRPC's own 4 MiB
// default would refuse a batch of 64 records with 64 KiB bodies.
const MaxMessageBytes = MaxBatch * (MaxBodyBytes + MaxTitleBytes + MaxDescriptionBytes + MaxTags*MaxTagBytes + 1024)

// grpcServer is go-plugin's server factory with the message limit raised.
func grpcServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes))...)
}

// grpcDialOptions are the host side's: the same message limit, and bad
// UTF-8 reported as bad input.
func grpcDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithChainUnaryInterceptor(utf8Interceptor),
	}
}
