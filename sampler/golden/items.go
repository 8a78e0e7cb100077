package golden

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

// Item is one golden record and the people's judgements of it (metric → value in [0, 1]).
type Item struct {
	ID     string
	Record *record.Record
	Human  map[string]float64
}

// ReadItems reads a golden set: one record per line in the JSON form `ragwatch eval` reads
// (docs/record.md), each with a unique trace_id and its human judgements in labels.values.
// Blank lines are skipped. A line that is not such a record is an error naming it; so is a
// set of more than max items.
func ReadItems(r io.Reader, name string, max int, now time.Time) ([]Item, error) {
	br := bufio.NewReader(r)
	var items []Item
	seen := map[string]int{}
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if s := strings.TrimSpace(line); s != "" {
			it, perr := parseItem([]byte(s), now)
			if perr != nil {
				return nil, fmt.Errorf("%s: line %d: %w", name, n, perr)
			}
			if first, dup := seen[it.ID]; dup {
				return nil, fmt.Errorf("%s: line %d: trace_id %q is also on line %d", name, n, it.ID, first)
			}
			seen[it.ID] = n
			if items = append(items, it); len(items) > max {
				return nil, fmt.Errorf("%s: more than %d items (golden.max_items)", name, max)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: no items", name)
	}
	return items, nil
}

func parseItem(line []byte, now time.Time) (Item, error) {
	var r record.Record
	if err := json.Unmarshal(line, &r); err != nil {
		return Item{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if r.TraceID == "" {
		return Item{}, errors.New("trace_id is required: it names the item in alerts")
	}
	if err := r.Validate(); err != nil {
		return Item{}, errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if r.Labels == nil || len(r.Labels.Values) == 0 {
		return Item{}, errors.New("labels.values is empty: a golden item needs human judgements")
	}
	// Record.Validate checked that every value is in [0, 1].
	r.Normalize(now)
	return Item{ID: r.TraceID, Record: &r, Human: r.Labels.Values}, nil
}
