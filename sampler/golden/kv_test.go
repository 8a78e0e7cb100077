package golden

import "github.com/nats-io/nats.go/jetstream"

func jetstreamConfig(bucket string) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: bucket}
}
