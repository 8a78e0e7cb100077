package span

// PruneSpanAttrs is pruneSpanAttrs, for the external tests.
var PruneSpanAttrs = pruneSpanAttrs
