package config

// Conventions adjusts how traces are read (docs/conventions.md).
type Conventions struct {
	// RetrievalTools are the names of the Vercel AI SDK tools (ai.toolCall.name) whose calls
	// are retrievals whatever their result's shape; a tool whose result is document-shaped is
	// one without being named.
	RetrievalTools []string `yaml:"retrieval_tools"`
}

// Bounds of conventions.retrieval_tools.
const (
	maxRetrievalTools    = 64
	maxRetrievalToolName = 256
)

// Validate implements Validator.
func (c Conventions) Validate() error {
	var errs []error
	if len(c.RetrievalTools) > maxRetrievalTools {
		errs = append(errs, Invalid("retrieval_tools", "at most %d tools, got %d", maxRetrievalTools, len(c.RetrievalTools)))
	}
	seen := make(map[string]bool, len(c.RetrievalTools))
	for i, name := range c.RetrievalTools {
		switch {
		case name == "":
			errs = append(errs, Invalid("retrieval_tools", "entry %d is empty", i))
		case len(name) > maxRetrievalToolName:
			errs = append(errs, Invalid("retrieval_tools", "entry %d is longer than %d bytes", i, maxRetrievalToolName))
		case seen[name]:
			errs = append(errs, Invalid("retrieval_tools", "entry %d repeats %q", i, name))
		}
		seen[name] = true
	}
	return joinErrs(errs)
}
