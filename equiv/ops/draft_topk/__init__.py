"""The draft top-k operation: softmax over the vocabulary, then top-k, its paths, recipes, comparison, tolerances and mutants."""
