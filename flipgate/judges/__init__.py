"""The judge consensus suite (docs/suites/judges.md, docs/definitions.md §9): each judge model
ranks candidate sets over K orderings; direct vs permutation-consensus accuracy. The judging
itself (listwise and label readouts, orderings, consensus over orderings) is the library in
flipgate.judging, which the facets' sem-flip judge and the readout decomposition use too."""
