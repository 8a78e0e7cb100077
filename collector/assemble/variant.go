package assemble

// variantOf is the turn's variant: the best-ranked one among the turn span, its ancestors and
// its spans (the first in that order on a tie), else the best-ranked one of the whole trace
// (a flag evaluated in a sibling span still names the variant that served the request).
func (b *builder) variantOf(ctx []int) string {
	best, rank := "", uint8(0)
	for _, i := range ctx {
		if s := b.t.nodes[i].span; s != nil && s.VariantRank > 0 && (rank == 0 || s.VariantRank < rank) {
			best, rank = s.Variant, s.VariantRank
		}
	}
	if rank > 0 {
		return best
	}
	for i := 0; i < b.t.n; i++ {
		if s := b.t.nodes[i].span; s != nil && s.VariantRank > 0 && (rank == 0 || s.VariantRank < rank) {
			best, rank = s.Variant, s.VariantRank
		}
	}
	return best
}
