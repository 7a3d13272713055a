package web

// fetchProblem words why a catalogue fetch failed.
func fetchProblem(err error) string {
	return "see its status below."
}
