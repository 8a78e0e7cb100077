package config

import "time"

// NATS configures the embedded server or the connection to an external cluster.
// Owned by the NATS work (issue 3); extend here.
type NATS struct {
	URL      string       `yaml:"url"` // "" starts the embedded server
	StoreDir string       `yaml:"store_dir"`
	Embedded NATSEmbedded `yaml:"embedded"`
}

// NATSEmbedded configures the embedded nats-server.
type NATSEmbedded struct {
	Endpoint string `yaml:"endpoint"`
}

func defaultNATS() NATS {
	return NATS{StoreDir: "./ragwatch-data", Embedded: NATSEmbedded{Endpoint: "127.0.0.1:4222"}}
}

// Feedback configures how late user feedback is joined to its record.
type Feedback struct {
	Retention time.Duration `yaml:"retention"`
}

func defaultFeedback() Feedback { return Feedback{Retention: 24 * time.Hour} }
