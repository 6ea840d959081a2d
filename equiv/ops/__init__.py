"""One folder per operation under test: its paths, recipes, judge and mutant zoo."""
