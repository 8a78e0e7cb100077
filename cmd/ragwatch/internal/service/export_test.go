package service

// ComponentNames lists a's components in start order, for tests of the component list.
func ComponentNames(a *App) []string {
	names := make([]string, len(a.components))
	for i, c := range a.components {
		names[i] = c.name
	}
	return names
}
