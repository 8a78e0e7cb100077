package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// puller hands the pool's workers the consumer's records over one pull subscription
// (jetstream's Messages iterator), kept for the pool's life: it asks for at most one record per
// worker, and again once half of them are taken. Consumer.Next, which it replaces, made a
// subscription and a pull request for every record, which cost the server and the client a
// sixth of the queue's CPU per record (docs/performance.md).
//
// Up to max records (one per worker) are pulled ahead and wait in the client until a worker
// is free; their ack_wait runs while they wait, which Pool.handle allows for. At shutdown
// the records pulled ahead are nak'ed, so they go to another worker at once instead of after
// ack_wait.
type puller struct {
	cons   jetstream.Consumer
	max    int
	expiry time.Duration // how long one pull request waits at the server

	mu sync.Mutex
	it jetstream.MessagesContext
}

// next blocks until a record comes, ctx ends, or the subscription fails. A subscription the
// server ended (the consumer deleted) is replaced on the next call.
func (p *puller) next(ctx context.Context) (jetstream.Msg, error) {
	it, err := p.iter()
	if err != nil {
		return nil, err
	}
	msg, err := it.Next(jetstream.NextContext(ctx))
	if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() == nil {
		p.mu.Lock()
		if p.it == it {
			p.it = nil
		}
		p.mu.Unlock()
	}
	return msg, err
}

func (p *puller) iter() (jetstream.MessagesContext, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.it == nil {
		it, err := p.cons.Messages(jetstream.PullMaxMessages(p.max), jetstream.PullExpiry(p.expiry))
		if err != nil {
			return nil, err
		}
		p.it = it
	}
	return p.it, nil
}

// stop ends the subscription once the workers have stopped and naks the records it holds.
func (p *puller) stop() {
	p.mu.Lock()
	it := p.it
	p.it = nil
	p.mu.Unlock()
	if it == nil {
		return
	}
	it.Drain()
	for {
		msg, err := it.Next(jetstream.NextMaxWait(time.Second))
		if err != nil {
			return
		}
		_ = msg.Nak()
	}
}
